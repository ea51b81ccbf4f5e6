//! What federation writes to NATS and reads back: bucket keys, question and end entries,
//! presence beats, answer requests and their replies (documented in proto/PROTOCOL.md,
//! "Federation"). Anything read from NATS is untrusted: a malformed entry or request is
//! refused, never a panic.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::broker::{PeerId, SharedEnd, SharedQuestion, ValidRequest};
use crate::protocol::{
    parse_inbound, AskUserResponse, ErrorCode, FrameError, Inbound, Outcome, ProducerInfo, UiInfo,
    WithdrawReason,
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
    let mut out = Vec::with_capacity(q.questions.len() + 256);
    out.extend_from_slice(br#"{"v":1,"node":"#);
    serde_json::to_writer(&mut out, node).expect("a string serializes");
    out.extend_from_slice(br#","correlationId":"#);
    serde_json::to_writer(&mut out, &*q.id).expect("a string serializes");
    out.extend_from_slice(br#","questions":"#);
    out.extend_from_slice(q.questions.as_bytes());
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
        questions: Box<RawValue>,
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
    Some(Entry::Question {
        id: raw.correlation_id,
        questions: raw.questions?,
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
    context: Option<&RawValue>,
) -> Result<ValidRequest, String> {
    let mut frame = br#"{"type":"ask-user-request","correlationId":"#.to_vec();
    serde_json::to_writer(&mut frame, id).map_err(|e| e.to_string())?;
    frame.extend_from_slice(br#","questions":"#);
    frame.extend_from_slice(questions.get().as_bytes());
    if let Some(context) = context {
        frame.extend_from_slice(br#","context":"#);
        frame.extend_from_slice(context.get().as_bytes());
    }
    frame.push(b'}');
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

/// An answer to send to the origin: an `ask-user-response` frame plus who answered.
pub fn answer_request(resp: &AskUserResponse, by: &UiInfo, peer: PeerId) -> Vec<u8> {
    let answers: Map<String, Value> = resp
        .answers
        .iter()
        .map(|(i, a)| (i.to_string(), json!(a)))
        .collect();
    let mut ui = serde_json::to_value(by).expect("UiInfo serializes");
    ui["peer"] = json!(peer);
    serde_json::to_vec(&json!({
        "type": "ask-user-response",
        "correlationId": resp.correlation_id,
        "answers": answers,
        "cancelled": resp.cancelled,
        "ui": ui,
    }))
    .expect("JSON serializes")
}

/// An answer another node sent: the response (checked as a UI's would be), who answered, and
/// their connection there.
pub fn parse_answer(bytes: &[u8]) -> Result<(AskUserResponse, UiInfo, Option<PeerId>), FrameError> {
    let resp = match parse_inbound(bytes)? {
        Inbound::AskUserResponse(r) => r,
        _ => {
            return Err(FrameError::new(
                ErrorCode::InvalidResponse,
                "an answer request must be an ask-user-response",
            ))
        }
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
pub fn answer_reply(decision: &Result<Outcome, FrameError>) -> Vec<u8> {
    serde_json::to_vec(&super::reply_of(decision)).expect("JSON serializes")
}

#[derive(Deserialize)]
pub struct AnswerReply {
    #[serde(default)]
    outcome: Option<Outcome>,
    #[serde(default)]
    error: Option<ReplyError>,
}

#[derive(Deserialize)]
struct ReplyError {
    code: String,
    message: String,
}

impl AnswerReply {
    /// What the UI is told: an ack, or the origin's error as the origin worded it.
    pub fn decision(self, id: &str) -> Result<Outcome, FrameError> {
        match (self.outcome, self.error) {
            (Some(outcome @ (Outcome::Answered | Outcome::Dismissed)), None) => Ok(outcome),
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
        assert_eq!(resp.answers[&0], "b");
        assert_eq!(by.node.as_deref(), Some("B"));
        assert_eq!(peer, Some(9));
    }
}
