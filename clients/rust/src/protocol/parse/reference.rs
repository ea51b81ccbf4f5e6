//! The reference parser: it decides every frame. It reads the payload into a JSON tree and
//! checks each field, wording every error a peer is sent; `super::fast` may only take frames
//! this parser accepts, and must then yield the same `Inbound`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::protocol::error::{ErrorCode, FrameError, RequestKind};
use crate::protocol::frames::{
    check_context_value, question_index, valid_via, AskUserRequest, AskUserResponse, CancelReason,
    Decision, Inbound, NoUiPolicy, RequestContext, RequestQuestions, SubscribeFilter, TimeoutMs,
    ToolConfirmationRequest, ToolConfirmationResponse, ToolOutcome, MAX_APPROVAL_MESSAGE_CHARS,
    MAX_CLIENT_CHARS, MAX_VIA_CHARS,
};
use crate::protocol::frames::{
    valid_sink, HistoryFilter, HistoryQueryFrame, NotifyReport, NotifyResult, MAX_HISTORY_LIMIT,
    MAX_REPORT_ERROR_CHARS, MAX_REPORT_IDS, MAX_SINK_CHARS, MAX_USER_CHARS,
};
use crate::protocol::{MAX_CORRELATION_ID_CHARS, PROTOCOL_VERSION};

/// Parses one frame's payload. Errors carry the code and message the peer is sent.
pub fn parse(payload: &[u8]) -> Result<Inbound, FrameError> {
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
        ));
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                format!("frame field \"type\" must be a string, not {}", kind(other)),
            ))
        }
        None => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                "frame has no \"type\" field",
            ))
        }
    };
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
        "ask-user-request" => parse_request(value).map_err(|mut e| {
            e.request = Some(RequestKind::Question);
            e
        }),
        "tool-confirmation-request" => parse_approval(value).map_err(|mut e| {
            e.request = Some(RequestKind::Approval);
            e
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

/// A `notify-report`: every field checked, each error naming it (`invalid-frame`).
fn parse_notify_report(obj: &Map<String, Value>) -> Result<NotifyReport, FrameError> {
    let err = |msg: String| FrameError::new(ErrorCode::InvalidFrame, msg);
    let sink = match obj.get("sink") {
        Some(Value::String(s)) if valid_sink(s) => s.clone(),
        Some(Value::String(s)) => {
            return Err(err(format!(
                "sink must be 1 to {MAX_SINK_CHARS} lowercase letters, digits or '-', starting with a letter, not {:?}",
                truncate(s, 64)
            )))
        }
        None => return Err(err("notify-report needs \"sink\"".into())),
        Some(other) => return Err(err(format!("sink must be a string, not {}", kind(other)))),
    };
    let result = match obj.get("result") {
        Some(Value::String(s)) => NotifyResult::parse(s).ok_or_else(|| {
            err(format!(
                "result must be one of sent, failed, answered, not {:?}",
                truncate(s, 64)
            ))
        })?,
        None => return Err(err("notify-report needs \"result\"".into())),
        Some(other) => return Err(err(format!("result must be a string, not {}", kind(other)))),
    };
    let correlation_ids = match obj.get("correlationIds") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) if ids.len() > MAX_REPORT_IDS => {
            return Err(err(format!(
                "correlationIds may name at most {MAX_REPORT_IDS} requests, not {}",
                ids.len()
            )))
        }
        Some(Value::Array(ids)) => ids
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s)
                    if !s.is_empty() && s.chars().count() <= MAX_CORRELATION_ID_CHARS =>
                {
                    Ok(s.clone())
                }
                Value::String(_) => Err(err(format!(
                    "correlationIds[{i}] must be 1 to {MAX_CORRELATION_ID_CHARS} characters"
                ))),
                other => Err(err(format!(
                    "correlationIds[{i}] must be a string, not {}",
                    kind(other)
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(err(format!(
                "correlationIds must be an array, not {}",
                kind(other)
            )))
        }
    };
    let error = match obj.get("error") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.chars().count() <= MAX_REPORT_ERROR_CHARS => Some(s.clone()),
        Some(Value::String(_)) => {
            return Err(err(format!(
                "error must be at most {MAX_REPORT_ERROR_CHARS} characters"
            )))
        }
        Some(other) => return Err(err(format!("error must be a string, not {}", kind(other)))),
    };
    Ok(NotifyReport {
        sink,
        result,
        correlation_ids,
        error,
    })
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

fn parse_request(value: Value) -> Result<Inbound, FrameError> {
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

fn parse_approval(value: Value) -> Result<Inbound, FrameError> {
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

/// A UI's decision on an approval, its shape checked (the outcome's offer is the broker's).
fn parse_decision(
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

fn parse_response(obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
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

fn correlation_id(
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
fn cancel_reason(obj: &Map<String, Value>) -> Result<CancelReason, FrameError> {
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

fn client_field(obj: &Map<String, Value>) -> Result<Option<String>, FrameError> {
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

/// A `subscribe`'s `filter`: absent, `null` or `{}` shows the UI everything it may see.
/// `via` in `hello` or `subscribe`: the kind of UI the peer claims to be. Any short lowercase
/// word is taken (the daemon records one it does not know as `client`).
fn via_field(obj: &Map<String, Value>) -> Result<Option<String>, FrameError> {
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
fn user_field(obj: &Map<String, Value>) -> Result<Option<String>, String> {
    match obj.get("user") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_USER_CHARS => {
            Ok(Some(s.clone()))
        }
        Some(Value::String(_)) => Err(format!("user must be 1 to {MAX_USER_CHARS} characters")),
        Some(other) => Err(format!("user must be a string, not {}", kind(other))),
    }
}

/// A `history` query: its filter's keys known and their values well formed, `limit` and
/// `cursor` in range (`invalid-frame` names what is not).
fn parse_history(obj: &Map<String, Value>) -> Result<HistoryQueryFrame, FrameError> {
    let err = |msg: String| FrameError::new(ErrorCode::InvalidFrame, msg);
    let mut filter = HistoryFilter::default();
    match obj.get("filter") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (key, value) in map {
                let Some(slot) = filter.slot(key) else {
                    return Err(err(format!(
                        "history filter has no key {:?} (known: {})",
                        truncate(key, 32),
                        HistoryFilter::KEYS.join(", ")
                    )));
                };
                match value {
                    Value::Null => {}
                    Value::String(s) if s.is_empty() || s.chars().count() > MAX_CLIENT_CHARS => {
                        return Err(err(format!(
                            "filter.{key} must be 1 to {MAX_CLIENT_CHARS} characters"
                        )))
                    }
                    Value::String(s) => *slot = Some(s.clone()),
                    other => {
                        return Err(err(format!(
                            "filter.{} must be a string, not {}",
                            truncate(key, 32),
                            kind(other)
                        )))
                    }
                }
            }
        }
        Some(other) => {
            return Err(err(format!(
                "filter must be an object, not {}",
                kind(other)
            )))
        }
    }
    for (name, t) in [("since", &filter.since), ("until", &filter.until)] {
        if let Some(t) = t {
            if crate::protocol::time::parse_rfc3339_ms(t).is_none() {
                return Err(err(format!(
                    "filter.{name} must be an RFC 3339 time (2026-12-05T14:00:00Z), not {:?}",
                    truncate(t, 64)
                )));
            }
        }
    }
    if let Some(k) = &filter.kind {
        if k != "question" && k != "approval" {
            return Err(err(format!(
                "filter.kind must be question or approval, not {:?}",
                truncate(k, 64)
            )));
        }
    }
    let limit = match obj.get("limit") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(l) if (1..=u64::from(MAX_HISTORY_LIMIT)).contains(&l) => Some(l as u32),
            _ => {
                return Err(err(format!(
                    "limit must be an integer from 1 to {MAX_HISTORY_LIMIT}, not {}",
                    truncate(&n.to_string(), 32)
                )))
            }
        },
        Some(other) => {
            return Err(err(format!(
                "limit must be an integer, not {}",
                kind(other)
            )))
        }
    };
    let cursor = match obj.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c))
            if !c.is_empty()
                && c.len() <= 48
                && c.bytes().all(|b| b.is_ascii_digit() || b == b'.') =>
        {
            Some(c.clone())
        }
        Some(Value::String(c)) => {
            return Err(err(format!(
                "cursor must be a cursor a history answer gave, not {:?}",
                truncate(c, 32)
            )))
        }
        Some(other) => return Err(err(format!("cursor must be a string, not {}", kind(other)))),
    };
    Ok(HistoryQueryFrame {
        filter,
        limit,
        cursor,
    })
}

fn filter_field(obj: &Map<String, Value>) -> Result<SubscribeFilter, FrameError> {
    let err = |msg: String| FrameError::new(ErrorCode::InvalidFrame, msg);
    let map = match obj.get("filter") {
        None | Some(Value::Null) => return Ok(SubscribeFilter::default()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(err(format!(
                "filter must be an object, not {}",
                kind(other)
            )))
        }
    };
    let mut filter = SubscribeFilter::default();
    for (key, value) in map {
        // Unlike the request's context, a filter key this daemon does not know is refused:
        // ignoring it would show the UI more than it asked for.
        let Some(slot) = filter.slot(key) else {
            return Err(err(format!(
                "filter has no key {:?} (known: {})",
                truncate(key, 32),
                SubscribeFilter::KEYS.join(", ")
            )));
        };
        match value {
            Value::Null => {}
            Value::String(s) => {
                check_context_value(SubscribeFilter::key_name(key), s)
                    .map_err(|m| err(format!("filter.{}", &m["context.".len()..])))?;
                *slot = Some(s.clone());
            }
            other => {
                return Err(err(format!(
                    "filter.{} must be a string, not {}",
                    truncate(key, 32),
                    kind(other)
                )))
            }
        }
    }
    Ok(filter)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
