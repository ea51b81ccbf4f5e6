//! Answers across nodes: a UI's answer sent to the question's origin on
//! `P.answer.<origin>.<sender>` (the response frame plus who answered), and the origin's
//! reply (the ack that UI is owed, or why not). Both ends are on every cross-node answer's
//! path, so the request is written straight into its buffer, and read by taking its `"ui"`
//! out and passing the rest, the UI's own frame, through the door a local answer takes.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::ReplyError;
use crate::broker::{Acked, Answer, PeerId};
use crate::hub::federation::unreachable;
use crate::intake::{self, Refused, Request};
use crate::protocol::json::{write_bool, write_i64, write_str, write_u64};
use crate::protocol::{
    Decision, ErrorCode, FrameError, Outcome, ToolConfirmationResponse, ToolOutcome, UiInfo,
};

/// An answer to send to the origin: the UI's `ask-user-response` or
/// `tool-confirmation-response` frame plus who answered (`"ui"`, last).
pub fn answer_request(answer: &Answer, by: &UiInfo, peer: PeerId) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    match answer {
        Answer::Question(resp) => {
            out.extend_from_slice(br#"{"type":"ask-user-response","correlationId":"#);
            write_str(&mut out, &resp.correlation_id);
            out.extend_from_slice(br#","answers":{"#);
            for (n, (i, a)) in resp.answers.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                write_u64(&mut out, *i as u64);
                out.extend_from_slice(b"\":");
                write_str(&mut out, a);
            }
            out.extend_from_slice(br#"},"cancelled":"#);
            write_bool(&mut out, resp.cancelled);
        }
        Answer::Approval(ToolConfirmationResponse {
            correlation_id,
            decision,
            ..
        }) => {
            out.extend_from_slice(br#"{"type":"tool-confirmation-response","correlationId":"#);
            write_str(&mut out, correlation_id);
            match decision {
                Decision::Dismissed => out.extend_from_slice(br#","dismissed":true"#),
                Decision::Decided {
                    outcome,
                    message,
                    payload,
                } => {
                    out.extend_from_slice(br#","confirmed":"#);
                    write_bool(&mut out, outcome.confirms());
                    out.extend_from_slice(br#","outcome":"#);
                    write_str(&mut out, outcome.as_str());
                    if let Some(m) = message {
                        out.extend_from_slice(br#","message":"#);
                        write_str(&mut out, m);
                    }
                    if let Some(p) = payload {
                        out.extend_from_slice(br#","payload":"#);
                        serde_json::to_writer(&mut out, p).expect("a JSON object serializes");
                    }
                }
            }
        }
    }
    out.extend_from_slice(br#","ui":"#);
    write_ui(&mut out, by, Some(peer));
    out.push(b'}');
    out
}

/// Who answered as the federation messages carry it: `UiInfo`'s fields as serde writes them
/// (`pid` always, `null` when unknown), then the UI's connection on its node, when given.
pub fn write_ui(out: &mut Vec<u8>, by: &UiInfo, peer: Option<PeerId>) {
    out.push(b'{');
    if let Some(client) = &by.client {
        out.extend_from_slice(br#""client":"#);
        write_str(out, client);
        out.push(b',');
    }
    out.extend_from_slice(br#""pid":"#);
    match by.pid {
        Some(pid) => write_i64(out, pid.into()),
        None => out.extend_from_slice(b"null"),
    }
    if let Some(node) = &by.node {
        out.extend_from_slice(br#","node":"#);
        write_str(out, node);
    }
    if let Some(peer) = peer {
        out.extend_from_slice(br#","peer":"#);
        write_u64(out, peer);
    }
    out.push(b'}');
}

/// An answer another node sent: the response (checked as a UI's would be), who answered, and
/// their connection there.
pub fn parse_answer(bytes: &[u8]) -> Result<(Answer, UiInfo, Option<PeerId>), FrameError> {
    // Not JSON, or a `"ui"` this does not take apart: the whole request goes through the door
    // (which words the refusal, or reads the answer and skips the `"ui"` it cannot use).
    let (frame, ui) = without_ui(bytes).unwrap_or((Cow::Borrowed(bytes), None));
    let not_an_answer = || {
        FrameError::new(
            ErrorCode::InvalidResponse,
            "an answer request must be an ask-user-response or a tool-confirmation-response",
        )
    };
    let resp = match intake::read(&frame) {
        Ok(Request::Answer(r)) => Answer::Question(r),
        Ok(Request::Decide(r)) => Answer::Approval(r),
        Ok(_) | Err(Refused::Request { .. }) => return Err(not_an_answer()),
        Err(Refused::Frame(e)) => return Err(e),
    };
    let (by, peer) = ui.map_or((NOBODY, None), read_ui);
    Ok((resp, by, peer))
}

/// What an answer request that does not say who answered names.
const NOBODY: UiInfo = UiInfo {
    client: None,
    pid: None,
    node: None,
};

/// The top-level `"ui"` of an answer request, borrowed.
#[derive(Deserialize)]
struct UiMember<'a> {
    #[serde(default, borrow)]
    ui: Option<&'a RawValue>,
}

/// Splits an answer request into the UI's frame (the request without its top-level `"ui"`
/// member) and that member's value. `None` when the request is not JSON, names `"ui"` twice,
/// or spells its key in a way this does not take apart (escaped, say).
fn without_ui(bytes: &[u8]) -> Option<(Cow<'_, [u8]>, Option<&RawValue>)> {
    let member: UiMember = serde_json::from_slice(bytes).ok()?;
    let Some(ui) = member.ui else {
        return Some((Cow::Borrowed(bytes), None));
    };
    // The raw value is a slice of `bytes`: where it starts and ends there.
    let start = (ui.get().as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
    let end = start
        .checked_add(ui.get().len())
        .filter(|&e| e <= bytes.len())?;
    let key = bytes[..start]
        .trim_ascii_end()
        .strip_suffix(b":")?
        .trim_ascii_end()
        .strip_suffix(br#""ui""#)?
        .trim_ascii_end();
    // Cut from the comma before the member to its end; or, the first member, from its key to
    // the comma after it.
    let (from, to) = if let Some(before) = key.strip_suffix(b",") {
        (before.len(), end)
    } else if key.ends_with(b"{") {
        let after = &bytes[end..];
        let rest = after.trim_ascii_start();
        match rest.strip_prefix(b",") {
            Some(r) => (key.len(), bytes.len() - r.len()),
            None => (key.len(), end),
        }
    } else {
        return None;
    };
    let mut frame = Vec::with_capacity(bytes.len() - (to - from));
    frame.extend_from_slice(&bytes[..from]);
    frame.extend_from_slice(&bytes[to..]);
    Some((Cow::Owned(frame), Some(ui)))
}

/// The fields of `"ui"`, each read on its own: one of the wrong type is left out, never a
/// reason to refuse the answer (the sender is the subject's; these only describe its UI).
#[derive(Deserialize)]
struct RawUi<'a> {
    #[serde(default, borrow)]
    client: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pid: Option<&'a RawValue>,
    #[serde(default, borrow)]
    node: Option<&'a RawValue>,
    #[serde(default, borrow)]
    peer: Option<&'a RawValue>,
}

fn read_ui(ui: &RawValue) -> (UiInfo, Option<PeerId>) {
    let Ok(raw) = serde_json::from_str::<RawUi>(ui.get()) else {
        return (NOBODY, None);
    };
    fn field<'a, T: Deserialize<'a>>(v: Option<&'a RawValue>) -> Option<T> {
        v.and_then(|v| serde_json::from_str(v.get()).ok())
    }
    let by = UiInfo {
        client: field::<String>(raw.client).map(|s| s.chars().take(256).collect()),
        pid: field::<i64>(raw.pid).and_then(|p| i32::try_from(p).ok()),
        node: field::<String>(raw.node).map(|s| s.chars().take(64).collect()),
    };
    (by, field::<u64>(raw.peer))
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
