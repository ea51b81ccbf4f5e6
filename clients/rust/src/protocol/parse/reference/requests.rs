//! A producer's requests as the reference reads them: `ask-user-request` and
//! `tool-confirmation-request`, and the envelope they share (correlationId, timeoutMs, noUi,
//! context), checked in the documented order. The questions and the tool call are left to
//! `questions` and `approvals`, which validate them.

use serde_json::{Map, Value};

use super::{correlation_id, kind, truncate};
use crate::protocol::error::{ErrorCode, FrameError};
use crate::protocol::frames::{
    check_context_value, ApprovalMode, AskUserRequest, Inbound, NoUiPolicy, RequestContext,
    RequestQuestions, TimeoutMs, ToolConfirmationRequest,
};

pub(super) fn parse_request(value: Value) -> Result<Inbound, FrameError> {
    let Value::Object(obj) = &value else {
        unreachable!("checked by parse_inbound")
    };
    let (correlation_id, timeout_ms, no_ui, context) = envelope(obj, "ask-user-request")?;
    Ok(Inbound::AskUserRequest(AskUserRequest {
        correlation_id,
        timeout_ms,
        no_ui,
        context,
        questions: RequestQuestions::Params(value),
    }))
}

pub(super) fn parse_approval(value: Value) -> Result<Inbound, FrameError> {
    let Value::Object(frame) = value else {
        unreachable!("checked by parse_inbound")
    };
    let (correlation_id, timeout_ms, no_ui, context) =
        envelope(&frame, "tool-confirmation-request")?;
    Ok(Inbound::ToolConfirmationRequest(ToolConfirmationRequest {
        correlation_id,
        timeout_ms,
        no_ui,
        context,
        frame,
    }))
}

/// The fields every request shares, checked in the documented order.
type Envelope = (
    String,
    Option<TimeoutMs>,
    Option<NoUiPolicy>,
    Option<RequestContext>,
);

fn envelope(obj: &Map<String, Value>, frame: &str) -> Result<Envelope, FrameError> {
    let correlation_id = correlation_id(obj, ErrorCode::InvalidRequest, frame)?;
    let err = |msg: String| {
        FrameError::new(ErrorCode::InvalidRequest, msg).with_id(Some(&correlation_id))
    };
    let timeout_ms = match obj.get("timeoutMs") {
        None => None,
        Some(Value::Number(n)) => {
            if let Some(ms) = n.as_u64() {
                if ms == 0 {
                    return Err(err("timeoutMs must be at least 1".into()));
                }
                Some(TimeoutMs::Ms(ms))
            } else if n.as_i64().is_some() {
                return Err(err(format!("timeoutMs must be at least 1, not {n}")));
            } else {
                // Floats: only integral values are timeouts (`5000.0` is 5000 ms, as Python's
                // json writes a float); those past u64 clamp to the max.
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() != 0.0 || !f.is_finite() {
                    return Err(err(format!("timeoutMs must be an integer, not {n}")));
                }
                if f < 1.0 {
                    return Err(err(format!("timeoutMs must be at least 1, not {n}")));
                }
                // `u64::MAX as f64` rounds up to 2^64, so below it the cast is exact.
                if f < u64::MAX as f64 {
                    Some(TimeoutMs::Ms(f as u64))
                } else {
                    Some(TimeoutMs::Huge)
                }
            }
        }
        Some(other) => {
            return Err(err(format!(
                "timeoutMs must be an integer number of milliseconds, not {}",
                kind(other)
            )))
        }
    };
    let no_ui = match obj.get("noUi") {
        None => None,
        Some(Value::String(s)) if NoUiPolicy::parse(s).is_some() => NoUiPolicy::parse(s),
        Some(other) => {
            return Err(err(format!(
                "noUi must be \"wait\" or \"reject\", not {}",
                truncate(&other.to_string(), 64)
            )))
        }
    };
    let context = match obj.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => {
            let field = |name: &'static str| match map.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => check_context_value(name, s).map(|()| Some(s.clone())),
                Some(other) => Err(format!(
                    "context.{name} must be a string, not {}",
                    kind(other)
                )),
            };
            RequestContext {
                agent: field("agent").map_err(err)?,
                session: field("session").map_err(err)?,
                project: field("project").map_err(err)?,
                cwd: field("cwd").map_err(err)?,
                title: field("title").map_err(err)?,
                approval_mode: match map.get("approvalMode") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(ApprovalMode::parse(s).ok_or_else(|| {
                        err(ApprovalMode::refusal(&truncate(
                            &Value::String(s.clone()).to_string(),
                            64,
                        )))
                    })?),
                    Some(other) => {
                        return Err(err(format!(
                            "context.approvalMode must be a string, not {}",
                            kind(other)
                        )))
                    }
                },
                interactive: match map.get("interactive") {
                    None | Some(Value::Null) => None,
                    Some(Value::Bool(b)) => Some(*b),
                    Some(other) => {
                        return Err(err(format!(
                            "context.interactive must be true or false, not {}",
                            kind(other)
                        )))
                    }
                },
            }
            .into_option()
        }
        Some(other) => {
            return Err(err(format!(
                "context must be an object, not {}",
                kind(other)
            )))
        }
    };
    Ok((correlation_id, timeout_ms, no_ui, context))
}
