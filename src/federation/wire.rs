//! What federation writes to NATS and reads back: bucket keys, question and end entries,
//! presence beats, answer requests and their replies (documented in proto/PROTOCOL.md,
//! "Federation"). Anything read from NATS is untrusted: a malformed entry or request is
//! refused, never a panic.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::approvals::ApprovalBody;
use crate::broker::{Acked, Answer, Body, PeerId, SharedEnd, SharedQuestion, Valid, ValidRequest};
use crate::protocol::{
    parse_inbound, Decision, ErrorCode, FrameError, Inbound, Outcome, ProducerInfo,
    ToolConfirmationResponse, ToolOutcome, UiInfo, WithdrawReason,
};

/// A question's key in the pending bucket: its node, then its id in unpadded base64url (KV
/// keys allow only `[-/_=.A-Za-z0-9]`).
pub fn key(node: &str, id: &str) -> String {
    format!("{node}.{}", URL_SAFE_NO_PAD.encode(id))
}

/// The correlationId a key's second part names.
pub fn id_of_key(encoded: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(encoded).ok()?;
    String::from_utf8(bytes).ok()
}

/// A pending question's entry.
pub fn question(node: &str, q: &SharedQuestion, deadline_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.body.bytes() + 256);
    out.extend_from_slice(br#"{"v":1,"node":"#);
    serde_json::to_writer(&mut out, node).expect("a string serializes");
    out.extend_from_slice(br#","correlationId":"#);
    serde_json::to_writer(&mut out, &*q.id).expect("a string serializes");
    match &q.body {
        Body::Approval(body) => {
            out.extend_from_slice(br#","kind":"approval","approval":"#);
            approval_fields(&mut out, body);
        }
        Body::Questions(n) => {
            out.extend_from_slice(br#","questions":"#);
            out.extend_from_slice(n.questions.as_bytes());
        }
    }
    out.extend_from_slice(br#","producer":"#);
    serde_json::to_writer(&mut out, &q.producer).expect("ProducerInfo serializes");
    if let Some(context) = &q.context {
        out.extend_from_slice(br#","context":"#);
        serde_json::to_writer(&mut out, context).expect("RequestContext serializes");
    }
    out.extend_from_slice(
        format!(
            r#","timeoutMs":{},"deadlineMs":{deadline_ms}}}"#,
            q.timeout_ms
        )
        .as_bytes(),
    );
    out
}

/// What an approval's entry carries: the fields of its `tool-confirmation-request` a UI is
/// shown (the effective outcomes), without the envelope. The tool call, annotations and
/// details are the JSON text the body keeps, copied in as they are.
fn approval_fields(out: &mut Vec<u8>, body: &ApprovalBody) {
    let string = |out: &mut Vec<u8>, s: &str| {
        serde_json::to_writer(&mut *out, s).expect("a string serializes")
    };
    out.extend_from_slice(br#"{"toolCall":"#);
    out.extend_from_slice(body.tool_call.as_bytes());
    if let Some(v) = &body.server_name {
        out.extend_from_slice(br#","serverName":"#);
        string(out, v);
    }
    if let Some(v) = &body.tool_annotations {
        out.extend_from_slice(br#","toolAnnotations":"#);
        out.extend_from_slice(v.as_bytes());
    }
    if let Some(v) = &body.subagent {
        out.extend_from_slice(br#","subagent":"#);
        string(out, v);
    }
    if let Some(v) = &body.details {
        out.extend_from_slice(br#","details":"#);
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(br#","outcomes":"#);
    let outcomes: Vec<&str> = body.outcomes.iter().map(|o| o.as_str()).collect();
    serde_json::to_writer(&mut *out, &outcomes).expect("strings serialize");
    out.push(b'}');
}

/// A question's end entry.
pub fn ended(node: &str, end: &SharedEnd) -> Vec<u8> {
    let mut v = json!({"v": 1, "node": node, "correlationId": &*end.id, "ended": end.reason});
    if let Some(by) = &end.answered_by {
        let mut by = serde_json::to_value(by).expect("UiInfo serializes");
        if let Some(peer) = end.winner_peer {
            by["peer"] = json!(peer);
        }
        v["answeredBy"] = by;
    }
    serde_json::to_vec(&v).expect("JSON serializes")
}

/// A pending bucket entry, as read.
#[derive(Debug)]
pub enum Entry {
    Question {
        id: String,
        /// A question's questions, or an approval's fields (`approval`).
        questions: Box<RawValue>,
        approval: bool,
        context: Option<Box<RawValue>>,
        producer: ProducerInfo,
        deadline_ms: u64,
    },
    Ended {
        id: String,
        reason: WithdrawReason,
        answered_by: Option<UiInfo>,
        /// The winning UI's connection on its node.
        winner_peer: Option<PeerId>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEntry {
    correlation_id: String,
    #[serde(default)]
    questions: Option<Box<RawValue>>,
    #[serde(default)]
    approval: Option<Box<RawValue>>,
    #[serde(default)]
    context: Option<Box<RawValue>>,
    #[serde(default)]
    producer: Option<ProducerInfo>,
    #[serde(default)]
    deadline_ms: Option<u64>,
    #[serde(default)]
    ended: Option<String>,
    #[serde(default)]
    answered_by: Option<Value>,
}

pub fn parse_entry(bytes: &[u8]) -> Option<Entry> {
    let raw: RawEntry = serde_json::from_slice(bytes).ok()?;
    if let Some(reason) = raw.ended {
        let reason = match reason.as_str() {
            "answered" | "dismissed" => WithdrawReason::Answered,
            "timeout" => WithdrawReason::Timeout,
            "producer-gone" => WithdrawReason::ProducerGone,
            "shutdown" => WithdrawReason::Shutdown,
            _ => WithdrawReason::Withdrawn,
        };
        let winner_peer = raw
            .answered_by
            .as_ref()
            .and_then(|b| b.get("peer"))
            .and_then(Value::as_u64);
        let answered_by = raw
            .answered_by
            .and_then(|b| serde_json::from_value::<UiInfo>(b).ok());
        return Some(Entry::Ended {
            id: raw.correlation_id,
            reason,
            answered_by,
            winner_peer,
        });
    }
    let (questions, approval) = match (raw.questions, raw.approval) {
        (Some(q), None) => (q, false),
        (None, Some(a)) => (a, true),
        _ => return None,
    };
    Some(Entry::Question {
        id: raw.correlation_id,
        questions,
        approval,
        context: raw.context,
        producer: raw.producer.unwrap_or_default(),
        deadline_ms: raw.deadline_ms?,
    })
}

/// A remote question through the same validation as a local request: a node that shares
/// garbage gets it refused here, not shown.
pub fn valid_request(
    id: &str,
    questions: &RawValue,
    approval: bool,
    context: Option<&RawValue>,
) -> Result<Valid, String> {
    let mut frame = if approval {
        // The approval's fields become the frame's own: `{"type":…,"correlationId":…,` + the
        // object without its opening brace.
        let fields = questions.get().trim_start();
        let Some(rest) = fields.strip_prefix('{') else {
            return Err("an approval entry's fields must be an object".into());
        };
        let mut f = br#"{"type":"tool-confirmation-request","correlationId":"#.to_vec();
        serde_json::to_writer(&mut f, id).map_err(|e| e.to_string())?;
        if let Some(context) = context {
            f.extend_from_slice(br#","context":"#);
            f.extend_from_slice(context.get().as_bytes());
        }
        if !rest.trim_start().starts_with('}') {
            f.push(b',');
        }
        f.extend_from_slice(rest.as_bytes());
        // As a local approval: the fast path where it can, the reference deciding the rest.
        if let Some(a) = crate::approvals::fast::check_request(&f) {
            #[cfg(debug_assertions)]
            crate::approvals::fast::assert_reference_agrees(&a, &f);
            return Ok(Valid::from(a));
        }
        return match parse_inbound(&f) {
            Ok(Inbound::ToolConfirmationRequest(req)) => crate::approvals::check(req)
                .map(Valid::from)
                .map_err(|r| r.message),
            Ok(_) => Err("not an approval".into()),
            Err(e) => Err(e.message),
        };
    } else {
        br#"{"type":"ask-user-request","correlationId":"#.to_vec()
    };
    serde_json::to_writer(&mut frame, id).map_err(|e| e.to_string())?;
    frame.extend_from_slice(br#","questions":"#);
    frame.extend_from_slice(questions.get().as_bytes());
    if let Some(context) = context {
        frame.extend_from_slice(br#","context":"#);
        frame.extend_from_slice(context.get().as_bytes());
    }
    frame.push(b'}');
    // As a local question: the fast path where it can, the reference deciding the rest.
    if let Some(req) = ValidRequest::fast_from(&frame) {
        return Ok(req);
    }
    match parse_inbound(&frame) {
        Ok(Inbound::AskUserRequest(req)) => {
            ValidRequest::check(req).map_err(|(_, _, e)| e.to_string())
        }
        Ok(_) => Err("not a request".into()),
        Err(e) => Err(e.message),
    }
}

/// This node's presence beat.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeBeat<'a> {
    pub v: u32,
    pub node: &'a str,
    pub server: &'a str,
    pub heartbeat_ms: u64,
    pub started_ms: u64,
}

/// An answer to send to the origin: the UI's `ask-user-response` or
/// `tool-confirmation-response` frame plus who answered.
pub fn answer_request(answer: &Answer, by: &UiInfo, peer: PeerId) -> Vec<u8> {
    let mut ui = serde_json::to_value(by).expect("UiInfo serializes");
    ui["peer"] = json!(peer);
    let v = match answer {
        Answer::Question(resp) => {
            let answers: Map<String, Value> = resp
                .answers
                .iter()
                .map(|(i, a)| (i.to_string(), json!(a)))
                .collect();
            json!({
                "type": "ask-user-response",
                "correlationId": resp.correlation_id,
                "answers": answers,
                "cancelled": resp.cancelled,
                "ui": ui,
            })
        }
        Answer::Approval(ToolConfirmationResponse {
            correlation_id,
            decision,
            ..
        }) => {
            let mut v = json!({
                "type": "tool-confirmation-response",
                "correlationId": correlation_id,
            });
            match decision {
                Decision::Dismissed => v["dismissed"] = json!(true),
                Decision::Decided {
                    outcome,
                    message,
                    payload,
                } => {
                    v["confirmed"] = json!(outcome.confirms());
                    v["outcome"] = json!(outcome.as_str());
                    if let Some(m) = message {
                        v["message"] = json!(m);
                    }
                    if let Some(p) = payload {
                        v["payload"] = Value::Object(p.clone());
                    }
                }
            }
            v["ui"] = ui;
            v
        }
    };
    serde_json::to_vec(&v).expect("JSON serializes")
}

/// An answer another node sent: the response (checked as a UI's would be), who answered, and
/// their connection there.
pub fn parse_answer(bytes: &[u8]) -> Result<(Answer, UiInfo, Option<PeerId>), FrameError> {
    let resp =
        match parse_inbound(bytes)? {
            Inbound::AskUserResponse(r) => Answer::Question(r),
            Inbound::ToolConfirmationResponse(r) => Answer::Approval(r),
            _ => return Err(FrameError::new(
                ErrorCode::InvalidResponse,
                "an answer request must be an ask-user-response or a tool-confirmation-response",
            )),
        };
    let v: Value = serde_json::from_slice(bytes).unwrap_or_default();
    let ui = v.get("ui");
    let by = UiInfo {
        client: ui
            .and_then(|u| u.get("client"))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(256).collect()),
        pid: ui
            .and_then(|u| u.get("pid"))
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok()),
        node: ui
            .and_then(|u| u.get("node"))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(64).collect()),
    };
    let peer = ui.and_then(|u| u.get("peer")).and_then(Value::as_u64);
    Ok((resp, by, peer))
}

/// The origin's reply to an answer request.
pub fn answer_reply(decision: &Result<Acked, FrameError>) -> Vec<u8> {
    serde_json::to_vec(&super::reply_of(decision)).expect("JSON serializes")
}

#[derive(Deserialize)]
pub struct AnswerReply {
    #[serde(default)]
    outcome: Option<Outcome>,
    /// An approval's decision: `{"confirmed","outcome"}`.
    #[serde(default)]
    approval: Option<ReplyApproval>,
    #[serde(default)]
    error: Option<ReplyError>,
}

#[derive(Deserialize)]
struct ReplyApproval {
    confirmed: bool,
    outcome: ToolOutcome,
}

#[derive(Deserialize)]
struct ReplyError {
    code: String,
    message: String,
}

impl AnswerReply {
    /// What the UI is told: an ack, or the origin's error as the origin worded it.
    pub fn decision(self, id: &str) -> Result<Acked, FrameError> {
        match (self.outcome, self.error) {
            (Some(reason @ (Outcome::Answered | Outcome::Dismissed)), None) => {
                Ok(match self.approval {
                    None => Acked::Question(reason),
                    Some(a) => Acked::Approval {
                        reason,
                        confirmed: a.confirmed,
                        outcome: a.outcome,
                    },
                })
            }
            (_, Some(e)) => {
                let code = ErrorCode::parse(&e.code).unwrap_or(ErrorCode::InvalidResponse);
                Err(FrameError::new(code, e.message).with_id(Some(id)))
            }
            _ => Err(super::unreachable(id, "the origin's reply said nothing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_any_correlation_id() {
        for id in ["a", "7c0d2f4e-0000", "ü/.*> \"x\"", &"z".repeat(128)] {
            let k = key("node-1", id);
            assert!(k
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.=/".contains(&b)));
            let (node, rest) = k.split_once('.').unwrap();
            assert_eq!(node, "node-1");
            assert_eq!(id_of_key(rest).as_deref(), Some(id));
        }
        assert_eq!(id_of_key("!!"), None);
    }

    #[test]
    fn an_approval_entry_is_checked_as_a_local_request_would_be() {
        let fields = |v: &str| RawValue::from_string(v.to_owned()).unwrap();
        let ok = fields(
            r#"{"toolCall":{"name":"run_shell_command","args":{}},"outcomes":["cancel","proceed_once","proceed_always"]}"#,
        );
        let context = fields(r#"{"project":"askbus"}"#);
        match valid_request("ap", &ok, true, Some(&context)) {
            Ok(a) => {
                let body = a.body().approval().expect("an approval");
                assert_eq!(body.tool(), "run_shell_command");
                assert_eq!(body.outcomes.len(), 3);
                assert_eq!(a.context().unwrap().project.as_deref(), Some("askbus"));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"toolCall":{"name":""}}"#,
            r#"{}"#,
            r#"[1]"#,
            r#"{"toolCall":{"name":"x"},"outcomes":["maybe"]}"#,
        ] {
            assert!(
                valid_request("ap", &fields(bad), true, None).is_err(),
                "{bad}"
            );
        }
        // An entry that holds both, or neither, is not read.
        assert!(parse_entry(
            br#"{"correlationId":"x","questions":[],"approval":{},"deadlineMs":1}"#
        )
        .is_none());
    }

    #[test]
    fn malformed_entries_and_answers_are_refused() {
        assert!(parse_entry(b"not json").is_none());
        assert!(parse_entry(br#"{"correlationId":"x"}"#).is_none());
        assert!(parse_answer(
            br#"{"type":"ask-user-response","correlationId":"x","answers":{"a":"b"}}"#
        )
        .is_err());
        let (resp, by, peer) = parse_answer(
            br#"{"type":"ask-user-response","correlationId":"x","answers":{"0":"b"},"ui":{"node":"B","pid":3,"peer":9}}"#,
        )
        .unwrap();
        let Answer::Question(resp) = resp else {
            panic!("a question's answer")
        };
        assert_eq!(resp.answers[&0], "b");
        assert_eq!(by.node.as_deref(), Some("B"));
        assert_eq!(peer, Some(9));
    }
}
