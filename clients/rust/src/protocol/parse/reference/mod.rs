//! The reference parser: it decides every frame. It reads the payload into a JSON tree and
//! checks each field, wording every error a peer is sent; `super::fast` (feature `fast`) may
//! only take frames this parser accepts, and must then yield the same `Inbound`.
//!
//! Here: the dispatch on `type`, `hello`, and the fields several frames share (correlationId,
//! a cancel's reason, client, via, user) with the wording of a value's JSON kind. By role:
//! `requests` reads a producer's requests (the envelope every request shares), `responses`
//! a UI's answers and decisions, `queries` what observers and tools send (`subscribe`'s
//! filter, `history`, `notify-report`).

use serde_json::{Map, Value};

use crate::protocol::error::{ErrorCode, FrameError, RequestKind};
use crate::protocol::frames::{
    valid_via, CancelReason, Inbound, MAX_CLIENT_CHARS, MAX_USER_CHARS, MAX_VIA_CHARS,
};
use crate::protocol::{MAX_CORRELATION_ID_CHARS, PROTOCOL_VERSION};

mod queries;
mod requests;
mod responses;

use queries::{filter_field, parse_history, parse_notify_report};
use requests::{parse_approval, parse_request};
use responses::{parse_decision, parse_response};

/// Why the reference refuses a payload. A request whose own fields are invalid is told apart
/// from any other refused frame by its kind: its refusal is the end of a request, which a
/// broker counts and logs as one (the daemon's door keeps the distinction in its own type).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not a request, or not one whose kind could be read.
    #[error(transparent)]
    Frame(FrameError),
    /// A request of this kind, refused for its own fields.
    #[error("{1}")]
    Request(RequestKind, FrameError),
}

impl Refusal {
    /// What the peer is told.
    pub fn error(&self) -> &FrameError {
        match self {
            Refusal::Frame(err) | Refusal::Request(_, err) => err,
        }
    }

    pub fn into_error(self) -> FrameError {
        match self {
            Refusal::Frame(err) | Refusal::Request(_, err) => err,
        }
    }
}

impl From<FrameError> for Refusal {
    fn from(err: FrameError) -> Refusal {
        Refusal::Frame(err)
    }
}

/// Parses one frame's payload. Errors carry the code and message the peer is sent.
pub fn parse(payload: &[u8]) -> Result<Inbound, Refusal> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| {
        let msg = if payload.is_empty() {
            "frame is empty; expected a JSON object".to_owned()
        } else {
            format!("frame is not valid JSON: {e}")
        };
        FrameError::new(ErrorCode::InvalidJson, msg)
    })?;
    let Value::Object(obj) = &value else {
        return Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("frame must be a JSON object, not {}", kind(&value)),
        )
        .into());
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                format!("frame field \"type\" must be a string, not {}", kind(other)),
            )
            .into())
        }
        None => {
            return Err(
                FrameError::new(ErrorCode::InvalidFrame, "frame has no \"type\" field").into(),
            )
        }
    };
    match ty {
        "ask-user-request" => {
            parse_request(value).map_err(|e| Refusal::Request(RequestKind::Question, e))
        }
        "tool-confirmation-request" => {
            parse_approval(value).map_err(|e| Refusal::Request(RequestKind::Approval, e))
        }
        _ => Ok(other_frame(ty, obj)?),
    }
}

/// Every frame but a request, by its `type`.
fn other_frame(ty: &str, obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
    match ty {
        "hello" => parse_hello(obj),
        "ping" => Ok(Inbound::Ping {
            id: obj.get("id").cloned(),
        }),
        "stats" => Ok(Inbound::Stats),
        "subscribe" => Ok(Inbound::Subscribe {
            client: client_field(obj)?,
            filter: filter_field(obj)?,
            via: via_field(obj)?,
        }),
        "watch" => Ok(Inbound::Watch {
            client: client_field(obj)?,
        }),
        "tool-confirmation-cancel" => {
            let correlation_id =
                correlation_id(obj, ErrorCode::InvalidRequest, "tool-confirmation-cancel")?;
            let reason = cancel_reason(obj)?;
            Ok(Inbound::ToolConfirmationCancel {
                correlation_id,
                reason,
            })
        }
        "tool-confirmation-response" => {
            let id = correlation_id(
                obj,
                ErrorCode::InvalidResponse,
                "tool-confirmation-response",
            )?;
            parse_decision(obj, id).map(Inbound::ToolConfirmationResponse)
        }
        "ask-user-cancel" => {
            let correlation_id = correlation_id(obj, ErrorCode::InvalidRequest, "ask-user-cancel")?;
            let reason = cancel_reason(obj)?;
            Ok(Inbound::AskUserCancel {
                correlation_id,
                reason,
            })
        }
        "ask-user-response" => parse_response(obj),
        "notify-report" => parse_notify_report(obj).map(Inbound::NotifyReport),
        "history" => parse_history(obj).map(Inbound::History),
        other => Err(FrameError::new(
            ErrorCode::UnknownType,
            format!("unknown frame type {:?}", truncate(other, 64)),
        )),
    }
}

fn parse_hello(obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
    let client = client_field(obj)?;
    let protocol = match obj.get("protocol") {
        // Only the integer literal: `1.0` and `1e0` are floats to serde (and to most
        // decoders), a sign of a peer that builds the frame from the wrong number type.
        Some(Value::Number(n)) if n.as_u64() == Some(PROTOCOL_VERSION) => PROTOCOL_VERSION,
        Some(Value::Number(n)) if n.as_f64() == Some(PROTOCOL_VERSION as f64) => {
            return Err(FrameError::new(
                ErrorCode::UnsupportedProtocol,
                format!(
                    "protocol {} is not supported; send the JSON integer {}, without a fraction or exponent",
                    truncate(&n.to_string(), 32),
                    PROTOCOL_VERSION
                ),
            ))
        }
        Some(other) => {
            return Err(FrameError::new(
                ErrorCode::UnsupportedProtocol,
                format!(
                    "protocol {} is not supported; this daemon speaks protocol {}",
                    truncate(&other.to_string(), 32),
                    PROTOCOL_VERSION
                ),
            ))
        }
        None => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                "hello must carry \"protocol\": 1",
            ))
        }
    };
    let via = via_field(obj)?;
    Ok(Inbound::Hello {
        protocol,
        client,
        via,
    })
}

pub(super) fn correlation_id(
    obj: &Map<String, Value>,
    code: ErrorCode,
    frame: &str,
) -> Result<String, FrameError> {
    match obj.get("correlationId") {
        Some(Value::String(id)) => {
            if id.is_empty() {
                Err(FrameError::new(code, "correlationId must not be empty"))
            } else if id.chars().count() > MAX_CORRELATION_ID_CHARS {
                Err(FrameError::new(
                    code,
                    format!("correlationId must be at most {MAX_CORRELATION_ID_CHARS} characters"),
                ))
            } else {
                Ok(id.clone())
            }
        }
        Some(other) => Err(FrameError::new(
            code,
            format!("correlationId must be a string, not {}", kind(other)),
        )),
        None => Err(FrameError::new(
            code,
            format!("{frame} needs a string \"correlationId\""),
        )),
    }
}

/// A cancel's `reason` (absent or `null`: `withdrawn`) and `via` (only with
/// `answered-elsewhere`): `invalid-request`, naming the field, for anything else.
pub(super) fn cancel_reason(obj: &Map<String, Value>) -> Result<CancelReason, FrameError> {
    let err = |msg: String| FrameError::new(ErrorCode::InvalidRequest, msg);
    let via = match obj.get("via") {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) if valid_via(v) => Some(v.clone()),
        Some(Value::String(v)) => {
            return Err(err(format!(
                "via must be 1 to {MAX_VIA_CHARS} lowercase letters, digits or '-', starting with a letter, not {:?}",
                truncate(v, 64)
            )))
        }
        Some(other) => return Err(err(format!("via must be a string, not {}", kind(other)))),
    };
    match obj.get("reason") {
        None | Some(Value::Null) if via.is_none() => Ok(CancelReason::Withdrawn),
        Some(Value::String(r)) if r == "withdrawn" && via.is_none() => Ok(CancelReason::Withdrawn),
        Some(Value::String(r)) if r == "answered-elsewhere" => {
            Ok(CancelReason::AnsweredElsewhere { via })
        }
        None | Some(Value::Null) => Err(err(
            "via is only for reason \"answered-elsewhere\"".to_owned()
        )),
        Some(Value::String(r)) if r == "withdrawn" => Err(err(
            "via is only for reason \"answered-elsewhere\"".to_owned(),
        )),
        Some(Value::String(r)) => Err(err(format!(
            "reason must be withdrawn or answered-elsewhere, not {:?}",
            truncate(r, 64)
        ))),
        Some(other) => Err(err(format!("reason must be a string, not {}", kind(other)))),
    }
}

pub(super) fn client_field(obj: &Map<String, Value>) -> Result<Option<String>, FrameError> {
    match obj.get("client") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= MAX_CLIENT_CHARS => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("client must be at most {MAX_CLIENT_CHARS} characters"),
        )),
        Some(other) => Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("client must be a string, not {}", kind(other)),
        )),
    }
}

/// `via` in `hello` or `subscribe`: the kind of UI the peer claims to be. Any short lowercase
/// word is taken (the daemon records one it does not know as `client`).
pub(super) fn via_field(obj: &Map<String, Value>) -> Result<Option<String>, FrameError> {
    let err = |msg: String| FrameError::new(ErrorCode::InvalidFrame, msg);
    match obj.get("via") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if valid_via(s) => Ok(Some(s.clone())),
        Some(Value::String(s)) => Err(err(format!(
            "via must be 1 to {MAX_VIA_CHARS} lowercase letters, digits or '-', starting with a letter (tui, web, notify, …), not {:?}",
            truncate(s, 64)
        ))),
        Some(other) => Err(err(format!("via must be a string, not {}", kind(other)))),
    }
}

/// `user` in a UI's answer: who answered, as the UI claims.
pub(super) fn user_field(obj: &Map<String, Value>) -> Result<Option<String>, String> {
    match obj.get("user") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_USER_CHARS => {
            Ok(Some(s.clone()))
        }
        Some(Value::String(_)) => Err(format!("user must be 1 to {MAX_USER_CHARS} characters")),
        Some(other) => Err(format!("user must be a string, not {}", kind(other))),
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
