//! What observers and tools send, as the reference reads it: a `subscribe`'s filter, a
//! `history` query and a notifier's `notify-report`, every field checked and each error naming
//! it (`invalid-frame`).

use serde_json::{Map, Value};

use super::{kind, truncate};
use crate::protocol::error::{ErrorCode, FrameError};
use crate::protocol::frames::{
    check_context_value, valid_sink, HistoryFilter, HistoryQueryFrame, NotifyReport, NotifyResult,
    SubscribeFilter, MAX_CLIENT_CHARS, MAX_HISTORY_LIMIT, MAX_REPORT_ERROR_CHARS, MAX_REPORT_IDS,
    MAX_SINK_CHARS,
};
use crate::protocol::MAX_CORRELATION_ID_CHARS;

/// A `subscribe`'s `filter`: absent, `null` or `{}` shows the UI everything it may see.
pub(super) fn filter_field(obj: &Map<String, Value>) -> Result<SubscribeFilter, FrameError> {
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

/// A `history` query: its filter's keys known and their values well formed, `limit` and
/// `cursor` in range (`invalid-frame` names what is not).
pub(super) fn parse_history(obj: &Map<String, Value>) -> Result<HistoryQueryFrame, FrameError> {
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

/// A `notify-report`: every field checked, each error naming it (`invalid-frame`).
pub(super) fn parse_notify_report(obj: &Map<String, Value>) -> Result<NotifyReport, FrameError> {
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
