//! The telemetry record: one request's end, as the broker builds it and the writer thread
//! writes it. A leaf (it depends only on the protocol's types), so the pure broker can build
//! records without depending on the I/O that writes them.

use std::io::Write;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use crate::protocol::{DecidedBy, End, ErrorCode, ProducerInfo, ToolOutcome, UiInfo};

/// One request's end, with the reference tool's ask_user metrics. The `Serialize` derive is
/// the specification of the line; [`Record::write_line`] writes the same bytes, faster (tested).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Stamped when the record leaves the broker; written as RFC 3339 UTC with milliseconds
    /// (formatted by the writer thread, off the broker's path).
    #[serde(serialize_with = "rfc3339_millis")]
    pub ts: SystemTime,
    /// Which daemon saw it: room for several federated daemons. Stamped with `ts`.
    pub node: Option<Arc<str>>,
    /// `None` for a request refused before it had a usable correlationId.
    pub correlation_id: Option<String>,
    /// How the request ended.
    pub reason: End,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    pub producer: ProducerInfo,
    /// The request's `context.agent` and `context.project`, when it carried them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ui: Option<UiInfo>,
    /// Present only when `reason` and `ui` cannot say who decided: a request its producer
    /// withdrew because a person answered it elsewhere (`answered-elsewhere`, e.g. in the
    /// editor of `askbus acp`: kind `human`), and one a policy rule decided (kind `rule`).
    /// The same object the bus-event and the history carry (`Ended::decided_by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Box<DecidedBy>>,
    pub latency_ms: u64,
    #[serde(rename = "question_types")]
    pub question_types: Vec<&'static str>,
    pub dismissed: bool,
    #[serde(rename = "empty_submission")]
    pub empty_submission: bool,
    #[serde(rename = "answer_count")]
    pub answer_count: usize,
    /// Set for approvals, whose line has its own shape (`write_line`).
    #[serde(skip)]
    pub approval: Option<Box<ApprovalFacts>>,
}

/// What an approval's record says beyond the fields every record has.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalFacts {
    /// `toolCall.name`; `None` for a request rejected before it was known.
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_type: Option<&'static str>,
    /// What the producer was told (absent for `rejected` and `producer-gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolOutcome>,
}

/// An approval's telemetry line: the common fields, `kind`, then its facts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApprovalLine<'a> {
    ts: String,
    node: Option<&'a str>,
    kind: &'static str,
    correlation_id: Option<&'a str>,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    producer: &'a ProducerInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    ui: Option<&'a UiInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<&'a DecidedBy>,
    latency_ms: u64,
    #[serde(flatten)]
    facts: &'a ApprovalFacts,
}

impl Record {
    /// Appends the record's JSON line (with its newline): the bytes serde writes for it,
    /// written by hand because the writer thread shares the machine with the broker.
    /// `ts_text` caches the last timestamp formatted (records of one burst share theirs).
    pub fn write_line(&self, out: &mut Vec<u8>, ts_text: &mut (SystemTime, Vec<u8>)) {
        use crate::protocol::json::{write_i64, write_str, write_u64};
        if let Some(facts) = &self.approval {
            let line = ApprovalLine {
                ts: humantime::format_rfc3339_millis(self.ts).to_string(),
                node: self.node.as_deref(),
                kind: "approval",
                correlation_id: self.correlation_id.as_deref(),
                reason: self.reason.as_str(),
                code: self.code.map(ErrorCode::as_str),
                producer: &self.producer,
                ui: self.ui.as_ref(),
                decided_by: self.decided_by.as_deref(),
                latency_ms: self.latency_ms,
                facts,
            };
            serde_json::to_writer(&mut *out, &line).expect("an approval line serializes");
            out.push(b'\n');
            return;
        }
        if ts_text.1.is_empty() || ts_text.0 != self.ts {
            ts_text.0 = self.ts;
            ts_text.1.clear();
            let _ = write!(
                ts_text.1,
                "\"{}\"",
                humantime::format_rfc3339_millis(self.ts)
            );
        }
        let pid = |out: &mut Vec<u8>, pid: Option<i32>| match pid {
            Some(p) => write_i64(out, p.into()),
            None => out.extend_from_slice(b"null"),
        };
        let opt_str = |out: &mut Vec<u8>, s: Option<&str>| match s {
            Some(s) => write_str(out, s),
            None => out.extend_from_slice(b"null"),
        };
        out.extend_from_slice(b"{\"ts\":");
        out.extend_from_slice(&ts_text.1);
        out.extend_from_slice(b",\"node\":");
        opt_str(out, self.node.as_deref());
        out.extend_from_slice(b",\"correlationId\":");
        opt_str(out, self.correlation_id.as_deref());
        out.extend_from_slice(b",\"reason\":");
        write_str(out, self.reason.as_str());
        if let Some(code) = self.code {
            out.extend_from_slice(b",\"code\":");
            write_str(out, code.as_str());
        }
        out.extend_from_slice(b",\"producer\":{");
        if let Some(client) = &self.producer.client {
            out.extend_from_slice(b"\"client\":");
            write_str(out, client);
            out.push(b',');
        }
        out.extend_from_slice(b"\"pid\":");
        pid(out, self.producer.pid);
        out.extend_from_slice(b",\"uid\":");
        write_u64(out, self.producer.uid.into());
        out.push(b'}');
        if let Some(agent) = &self.agent {
            out.extend_from_slice(b",\"agent\":");
            write_str(out, agent);
        }
        if let Some(project) = &self.project {
            out.extend_from_slice(b",\"project\":");
            write_str(out, project);
        }
        if let Some(ui) = &self.ui {
            out.extend_from_slice(b",\"ui\":{");
            if let Some(client) = &ui.client {
                out.extend_from_slice(b"\"client\":");
                write_str(out, client);
                out.push(b',');
            }
            out.extend_from_slice(b"\"pid\":");
            pid(out, ui.pid);
            if let Some(node) = &ui.node {
                out.extend_from_slice(b",\"node\":");
                write_str(out, node);
            }
            out.push(b'}');
        }
        if let Some(d) = &self.decided_by {
            // Rare (answered elsewhere, or by a rule): serde writes the object.
            out.extend_from_slice(b",\"decidedBy\":");
            serde_json::to_writer(&mut *out, d).expect("decidedBy serializes");
        }
        out.extend_from_slice(b",\"latencyMs\":");
        write_u64(out, self.latency_ms);
        out.extend_from_slice(b",\"question_types\":[");
        for (n, t) in self.question_types.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_str(out, t);
        }
        out.extend_from_slice(b"],\"dismissed\":");
        out.extend_from_slice(if self.dismissed { b"true" } else { b"false" });
        out.extend_from_slice(b",\"empty_submission\":");
        out.extend_from_slice(if self.empty_submission {
            b"true"
        } else {
            b"false"
        });
        out.extend_from_slice(b",\"answer_count\":");
        write_u64(out, self.answer_count as u64);
        out.extend_from_slice(b"}\n");
    }
}

fn rfc3339_millis<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_bytes_serde_writes() {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_796_290_000_123);
        let full = Record {
            ts: at,
            node: Some(Arc::from("host\"1")),
            correlation_id: Some("c-é\n".into()),
            reason: End::Answered,
            code: None,
            producer: ProducerInfo {
                client: Some("agent/1".into()),
                pid: Some(-4),
                uid: 1000,
            },
            agent: Some("gemini-cli/0.61.0".into()),
            project: Some("ask\"bus-é".into()),
            ui: Some(UiInfo {
                client: None,
                pid: Some(77),
                node: Some("b\"2".into()),
            }),
            decided_by: None,
            latency_ms: 1234,
            question_types: vec!["choice", "yesno"],
            dismissed: false,
            empty_submission: true,
            answer_count: 0,
            approval: None,
        };
        let bare = Record {
            node: None,
            correlation_id: None,
            reason: End::Rejected,
            code: Some(ErrorCode::InvalidRequest),
            producer: ProducerInfo {
                client: None,
                pid: None,
                uid: 0,
            },
            agent: None,
            project: None,
            ui: Some(UiInfo {
                client: Some("tui".into()),
                pid: None,
                node: None,
            }),
            question_types: vec![],
            dismissed: true,
            ..full.clone()
        };
        let elsewhere = Record {
            reason: End::Withdrawn,
            ui: None,
            decided_by: Some(Box::new(DecidedBy {
                via: Some("a\"cp".into()),
                uid: Some(1000),
                ..DecidedBy::of_end(End::Answered)
            })),
            ..full.clone()
        };
        let by_rule = Record {
            decided_by: Some(Box::new(DecidedBy {
                kind: "rule".into(),
                rule: Some(serde_json::json!({"toolName": "x", "decision": "allow"})),
                ..DecidedBy::of_end(End::Answered)
            })),
            ..full.clone()
        };
        let none_ui = Record {
            ui: None,
            agent: None,
            ts: at + std::time::Duration::from_millis(1),
            ..full.clone()
        };
        let mut ts_text = (SystemTime::UNIX_EPOCH, Vec::new());
        for record in [&full, &bare, &elsewhere, &by_rule, &none_ui, &full] {
            let mut ours = Vec::new();
            record.write_line(&mut ours, &mut ts_text);
            let mut theirs = serde_json::to_vec(record).unwrap();
            theirs.push(b'\n');
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap()
            );
        }
    }
}
