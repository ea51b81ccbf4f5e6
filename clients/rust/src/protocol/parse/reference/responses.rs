//! A UI's answers as the reference reads them: `ask-user-response` (answers keyed by question
//! index, or a dismissal) and `tool-confirmation-response` (an outcome, or a dismissal), their
//! shapes checked; whether the request offers that outcome or has that question is the
//! broker's to say.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{correlation_id, kind, truncate, user_field};
use crate::protocol::error::{ErrorCode, FrameError};
use crate::protocol::frames::{
    question_index, AskUserResponse, Decision, Inbound, ToolConfirmationResponse, ToolOutcome,
    MAX_APPROVAL_MESSAGE_CHARS,
};

/// A UI's decision on an approval, its shape checked (the outcome's offer is the broker's).
pub(super) fn parse_decision(
    obj: &Map<String, Value>,
    correlation_id: String,
) -> Result<ToolConfirmationResponse, FrameError> {
    let err = |msg: String| {
        FrameError::new(ErrorCode::InvalidResponse, msg).with_id(Some(&correlation_id))
    };
    let user = user_field(obj).map_err(err)?;
    match obj.get("dismissed") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Ok(ToolConfirmationResponse {
                correlation_id,
                decision: Decision::Dismissed,
                user,
            })
        }
        Some(other) => {
            return Err(err(format!(
                "dismissed must be a boolean, not {}",
                kind(other)
            )))
        }
    }
    let confirmed = match obj.get("confirmed") {
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(err(format!(
                "confirmed must be a boolean, not {}",
                kind(other)
            )))
        }
        None => {
            return Err(err(
                "tool-confirmation-response needs \"confirmed\" (or \"dismissed\": true)".into(),
            ))
        }
    };
    let outcome = match obj.get("outcome") {
        None => {
            if confirmed {
                ToolOutcome::ProceedOnce
            } else {
                ToolOutcome::Cancel
            }
        }
        Some(Value::String(s)) => ToolOutcome::parse(s).ok_or_else(|| {
            err(format!(
                "outcome must be one of {}, not {:?}",
                ToolOutcome::names(),
                truncate(s, 64)
            ))
        })?,
        Some(other) => {
            return Err(err(format!(
                "outcome must be a string, not {}",
                kind(other)
            )))
        }
    };
    if outcome.confirms() != confirmed {
        return Err(err(if confirmed {
            "confirmed is true but outcome is \"cancel\" (cancel denies)".into()
        } else {
            format!(
                "confirmed is false but outcome {:?} approves",
                outcome.as_str()
            )
        }));
    }
    let message = match obj.get("message") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= MAX_APPROVAL_MESSAGE_CHARS => {
            Some(s.clone())
        }
        Some(Value::String(_)) => {
            return Err(err(format!(
                "message must be at most {MAX_APPROVAL_MESSAGE_CHARS} characters"
            )))
        }
        Some(other) => {
            return Err(err(format!(
                "message must be a string, not {}",
                kind(other)
            )))
        }
    };
    let payload = match obj.get("payload") {
        None | Some(Value::Null) => None,
        Some(Value::Object(p)) => Some(p.clone()),
        Some(other) => {
            return Err(err(format!(
                "payload must be an object, not {}",
                kind(other)
            )))
        }
    };
    if outcome == ToolOutcome::ModifyWithEditor {
        let new_content = payload.as_ref().and_then(|p| p.get("newContent"));
        if !matches!(new_content, Some(Value::String(_))) {
            return Err(err(
                "outcome modify_with_editor needs payload.newContent, a string".into(),
            ));
        }
    }
    Ok(ToolConfirmationResponse {
        correlation_id,
        decision: Decision::Decided {
            outcome,
            message,
            payload,
        },
        user,
    })
}

pub(super) fn parse_response(obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
    let correlation_id = correlation_id(obj, ErrorCode::InvalidResponse, "ask-user-response")?;
    let err = |msg: String| {
        FrameError::new(ErrorCode::InvalidResponse, msg).with_id(Some(&correlation_id))
    };
    let user = user_field(obj).map_err(err)?;
    let cancelled = match obj.get("cancelled") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(err(format!(
                "cancelled must be a boolean, not {}",
                kind(other)
            )))
        }
    };
    let mut answers = BTreeMap::new();
    match obj.get("answers") {
        // A dismissal carries no answers; the seed's UI still sends `answers: {}`.
        None if cancelled => {}
        None => return Err(err("ask-user-response needs an \"answers\" object".into())),
        Some(Value::Object(map)) => {
            for (key, v) in map {
                let Some(index) = question_index(key) else {
                    return Err(err(format!(
                        "answers key {:?} is not a question index (\"0\", \"1\", …)",
                        truncate(key, 32)
                    )));
                };
                let Value::String(s) = v else {
                    return Err(err(format!(
                        "answers[{key:?}] must be a string, not {}",
                        kind(v)
                    )));
                };
                answers.insert(index, s.clone());
            }
        }
        Some(other) => {
            return Err(err(format!(
                "answers must be an object keyed by question index, not {}",
                kind(other)
            )))
        }
    }
    Ok(Inbound::AskUserResponse(AskUserResponse {
        correlation_id,
        answers,
        cancelled,
        user,
    }))
}
