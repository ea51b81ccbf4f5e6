//! Answers across nodes: a UI's answer sent to the question's origin on
//! `P.answer.<origin>.<sender>` (the response frame plus who answered), and the origin's
//! reply (the ack that UI is owed, or why not).

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::ReplyError;
use crate::broker::{Acked, Answer, PeerId};
use crate::hub::federation::unreachable;
use crate::protocol::{
    parse_inbound, Decision, ErrorCode, FrameError, Inbound, Outcome, ToolConfirmationResponse,
    ToolOutcome, UiInfo,
};

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
    serde_json::to_vec(&reply_of(decision)).expect("JSON serializes")
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
            _ => Err(unreachable(id, "the origin's reply said nothing")),
        }
    }
}

/// The answer a remote UI gets, as a reply (`Ok` = ack).
fn reply_of(decision: &Result<Acked, FrameError>) -> Value {
    match decision {
        Ok(Acked::Question(outcome)) => json!({ "outcome": outcome.as_str() }),
        Ok(Acked::Approval {
            reason,
            confirmed,
            outcome,
        }) => json!({
            "outcome": reason.as_str(),
            "approval": { "confirmed": confirmed, "outcome": outcome.as_str() },
        }),
        Err(e) => json!({ "error": { "code": e.code.as_str(), "message": e.message } }),
    }
}
