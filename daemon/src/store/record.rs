//! Requests as the store keeps them: a body as text (the normalized questions, or an
//! approval's fields) and back through the same validation a new request passes, the
//! redacted form, `shownSha256`, and times.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::time::Instant;

use super::query::StoredRequest;
use crate::approvals::ApprovalBody;
use crate::broker::{Body, Restored, Valid};
use crate::intake;
use crate::protocol::{ProducerInfo, RequestContext, RequestKind};

/// A body as stored: the normalized questions' JSON text, or an approval's fields as an
/// object (`toolCall`, `serverName`, `toolAnnotations`, `subagent`, `details`, `outcomes`).
pub fn body_text(body: &Body) -> String {
    match body {
        Body::Questions(n) => n.questions.to_string(),
        Body::Approval(a) => approval_fields(a).to_string(),
    }
}

fn approval_fields(a: &ApprovalBody) -> Value {
    let raw = |t: &str| serde_json::from_str::<Value>(t).unwrap_or(Value::Null);
    let mut v = json!({ "toolCall": raw(&a.tool_call), "outcomes": a.outcomes });
    let m = v.as_object_mut().expect("an object");
    if let Some(s) = &a.server_name {
        m.insert("serverName".into(), json!(s));
    }
    if let Some(t) = &a.tool_annotations {
        m.insert("toolAnnotations".into(), raw(t));
    }
    if let Some(s) = &a.subagent {
        m.insert("subagent".into(), json!(s));
    }
    if let Some(d) = &a.details {
        m.insert("details".into(), raw(d));
    }
    v
}

/// What `--history-text redact` keeps of a body: its shape (the questions' headers and
/// types, the tool's name and the details' type), not its text.
pub fn redacted_body(text: &str, kind: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    if kind == "approval" {
        let tool = v.pointer("/toolCall/name").cloned().unwrap_or(Value::Null);
        let details = v.pointer("/details/type").cloned();
        let mut out = json!({ "toolCall": { "name": tool }, "redacted": true });
        if let Some(t) = details {
            out["details"] = json!({ "type": t });
        }
        return out.to_string();
    }
    let shape: Vec<Value> = v
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| json!({ "header": q.get("header"), "type": q.get("type") }))
                .collect()
        })
        .unwrap_or_default();
    Value::Array(shape).to_string()
}

/// What redaction keeps of a producer's response: its reason and, for an approval, its
/// outcome (the decision), never answers or messages.
pub fn redacted_response(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let mut out = json!({ "type": v.get("type"), "reason": v.get("reason"), "redacted": true });
    for k in ["outcome", "confirmed"] {
        if let Some(x) = v.get(k) {
            out[k] = x.clone();
        }
    }
    out.to_string()
}

/// The stored request made valid again: through the parser and the checks a new request
/// passes, so a store edited by hand cannot put anything unchecked in front of a UI.
pub fn valid_of(id: &str, kind: &str, body: &str, context: Option<&str>) -> Result<Valid, String> {
    let mut frame = json!({ "correlationId": id });
    let m = frame.as_object_mut().expect("an object");
    if let Some(c) = context {
        m.insert(
            "context".into(),
            serde_json::from_str(c).map_err(|e| e.to_string())?,
        );
    }
    let body: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    if kind == "approval" {
        m.insert("type".into(), json!("tool-confirmation-request"));
        let Value::Object(fields) = body else {
            return Err("an approval's stored fields are not an object".into());
        };
        m.extend(fields);
    } else {
        m.insert("type".into(), json!("ask-user-request"));
        m.insert("questions".into(), body);
    }
    let bytes = serde_json::to_vec(&frame).map_err(|e| e.to_string())?;
    let kind = if kind == "approval" {
        RequestKind::Approval
    } else {
        RequestKind::Question
    };
    intake::read_remote(&bytes, kind)
}

/// A stored pending request as the broker restores it, its times mapped from the wall clock
/// to this process's monotonic one.
pub fn to_restored(r: &StoredRequest, now: Instant, wall: SystemTime) -> Result<Restored, String> {
    let request = valid_of(&r.correlation_id, &r.kind, &r.body, r.context.as_deref())?;
    let now_ms = super::epoch_ms(wall);
    let at = |ms: i64| {
        if ms >= now_ms {
            now + Duration::from_millis((ms - now_ms) as u64)
        } else {
            now.checked_sub(Duration::from_millis((now_ms - ms) as u64))
                .unwrap_or(now)
        }
    };
    Ok(Restored {
        request,
        producer: ProducerInfo {
            client: r.client.clone(),
            pid: r.pid,
            uid: r.uid,
        },
        accepted_at: at(r.asked_at),
        deadline: at(r.deadline_at),
        timeout_ms: r.timeout_ms,
    })
}

/// `shownSha256` of a request (PROTOCOL.md "shownSha256").
pub fn shown_sha256(id: &str, body: &Body, context: Option<&RequestContext>) -> String {
    use crate::protocol::shown::{shown_sha256, Shown};
    match body {
        Body::Questions(n) => {
            let questions: Value = serde_json::from_str(&n.questions).unwrap_or(Value::Null);
            shown_sha256(&Shown::Question {
                correlation_id: id,
                questions: &questions,
                context,
            })
        }
        Body::Approval(a) => {
            let tool_call: Value = serde_json::from_str(&a.tool_call).unwrap_or(Value::Null);
            let details: Option<Value> = a
                .details
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok());
            shown_sha256(&Shown::Approval {
                correlation_id: id,
                tool_call: &tool_call,
                details: details.as_ref(),
                context,
            })
        }
    }
}

pub use askbus::history::rfc3339_ms;
