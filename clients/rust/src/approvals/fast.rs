//! The fast path of [`super::check`], an optimisation of it for the approvals nearly every
//! agent sends: the tool call, details and annotations are checked on the text the producer
//! sent (`protocol::canonical`) and kept as that text, instead of being read into `Value`s and
//! written out again.
//!
//! Like the questions' fast path it only ever accepts: a field it cannot prove valid, or text
//! serde_json would not write back byte for byte (whitespace, a float, an unusual escape, a
//! repeated key), or a kind it does not read (`ask_user` details, whose questions are the
//! questions' own validation), makes it give up, and the reference decides and words the
//! error. On what it accepts it yields exactly the reference's [`ValidApproval`]; debug builds
//! assert it on every frame (in askbusd's `intake`).

use serde_json::value::RawValue;

use super::details::{fields, Field, DIFF_STAT_FIELDS};
use super::{ApprovalBody, ValidApproval, DETAIL_TYPES};
use crate::protocol::canonical::{self, Kind};
use crate::protocol::{parse_fast, ApprovalFields, FastFrame, RequestHead, ToolOutcome};

/// The whole fast path for one frame: `Some` for a `tool-confirmation-request` the reference
/// accepts (what `parse_inbound` and [`super::check`] make of it), `None` for anything else.
pub fn check_request(payload: &[u8]) -> Option<ValidApproval> {
    match parse_fast::<&RawValue>(payload)? {
        FastFrame::Approval(head, fields) => check(head, fields),
        _ => None,
    }
}

/// The approval, if its fields (read by `protocol::parse_fast`) are valid and canonical;
/// `None` leaves it to the reference.
pub fn check(head: RequestHead, f: ApprovalFields<'_>) -> Option<ValidApproval> {
    let tool_call = f.tool_call?.get();
    let call = canonical::members(tool_call)?;
    let name = member(&call, "name")?;
    let tool = string(name)?;
    if tool.is_empty()
        || member(&call, "args").is_some_and(|a| Kind::of(a) != Kind::Object)
        || member(&call, "id").is_some_and(|id| Kind::of(id) != Kind::String)
    {
        return None;
    }
    let server_name = optional_string(f.server_name)?;
    let tool_annotations = match f.tool_annotations.map(RawValue::get) {
        None | Some("null") => None,
        Some(text) if Kind::of(text) == Kind::Object && canonical::is_canonical(text) => Some(text),
        Some(_) => return None,
    };
    let subagent = optional_string(f.subagent)?;
    let (details, details_type) = match f.details.map(RawValue::get) {
        None | Some("null") => (None, None),
        Some(text) => (Some(text), Some(details(text)?)),
    };
    let outcomes = outcomes(f.outcomes)?;
    let body = ApprovalBody::new(
        tool_call.into(),
        server_name,
        tool_annotations.map(Box::from),
        subagent,
        details.map(Box::from),
        outcomes,
        tool.into_boxed_str(),
        details_type,
    );
    Some(ValidApproval {
        correlation_id: head.correlation_id,
        timeout_ms: head.timeout_ms,
        no_ui: head.no_ui,
        context: head.context,
        body,
    })
}

/// The value of `key` among an object's members (keys as written: the names looked up here
/// need no escapes, and an escaped spelling of one is not canonical).
fn member<'a>(members: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    members.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// A canonical JSON string's content.
fn string(text: &str) -> Option<String> {
    if Kind::of(text) != Kind::String {
        return None;
    }
    match canonical::plain_str(text) {
        Some(s) => Some(s.to_owned()),
        None => serde_json::from_str(text).ok(),
    }
}

/// `serverName` or `subagent`: absent or `null`, or a string. `None`: give up.
fn optional_string(raw: Option<&RawValue>) -> Option<Option<String>> {
    match raw.map(RawValue::get) {
        None | Some("null") => Some(None),
        Some(text) if Kind::of(text) == Kind::String => serde_json::from_str(text).ok().map(Some),
        Some(_) => None,
    }
}

/// `details`: canonical, and of the reference's shape for its type; its type.
fn details(text: &str) -> Option<&'static str> {
    let d = canonical::members(text)?;
    let ty = canonical::plain_str(member(&d, "type")?)?;
    let ty = DETAIL_TYPES.into_iter().find(|t| *t == ty)?;
    const COMMON: [(&str, Field, bool); 2] = [
        ("title", Field::Str, true),
        ("systemMessage", Field::Str, false),
    ];
    for &(name, field, required) in COMMON.iter().chain(fields(ty)) {
        let ok = match member(&d, name) {
            None => !required,
            Some(v) => field_ok(field, v)?,
        };
        if !ok {
            return None;
        }
    }
    Some(ty)
}

/// Whether `v` (canonical) has the shape `field` asks for; `None`: not read here.
fn field_ok(field: Field, v: &str) -> Option<bool> {
    let kind = Kind::of(v);
    Some(match field {
        Field::Str => kind == Kind::String,
        Field::StrOrNull => matches!(kind, Kind::String | Kind::Null),
        Field::Bool => kind == Kind::Bool,
        Field::Object => kind == Kind::Object,
        Field::Any => true,
        Field::Strs => strings(v),
        Field::DiffStat => {
            let stat = canonical::members(v)?;
            DIFF_STAT_FIELDS
                .iter()
                .all(|name| member(&stat, name).is_some_and(|n| Kind::of(n) == Kind::Number))
        }
        Field::Permissions => {
            let p = canonical::members(v)?;
            let fs_ok = match member(&p, "fileSystem") {
                None => true,
                Some(fs) => {
                    let fs = canonical::members(fs)?;
                    ["read", "write"]
                        .iter()
                        .all(|key| member(&fs, key).is_none_or(strings))
                }
            };
            fs_ok && member(&p, "network").is_none_or(|n| Kind::of(n) == Kind::Bool)
        }
        // The questions' own validation: left to the reference.
        Field::Questions => return None,
    })
}

/// Whether `v` is an array of strings.
fn strings(v: &str) -> bool {
    canonical::elements(v).is_some_and(|items| items.iter().all(|s| Kind::of(s) == Kind::String))
}

/// The effective outcomes: the producer's list (each once) with `proceed_once` and `cancel`
/// added, sorted.
fn outcomes(raw: Option<&RawValue>) -> Option<Vec<ToolOutcome>> {
    let text = match raw.map(RawValue::get) {
        None | Some("null") => return Some(ToolOutcome::MINIMAL.to_vec()),
        Some(text) => text,
    };
    let mut seen = ToolOutcome::MINIMAL.to_vec();
    let mut listed = Vec::new();
    for item in canonical::elements(text)? {
        let o = ToolOutcome::parse(canonical::plain_str(item)?)?;
        if listed.contains(&o) {
            return None;
        }
        listed.push(o);
        if !seen.contains(&o) {
            seen.push(o);
        }
    }
    seen.sort_unstable();
    Some(seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_inbound;
    use crate::protocol::Inbound;
    use serde_json::{json, Value};

    /// The reference's answer for `frame`.
    fn reference(frame: &str) -> Option<ValidApproval> {
        match parse_inbound(frame.as_bytes()) {
            Ok(Inbound::ToolConfirmationRequest(req)) => super::super::check(req).ok(),
            _ => None,
        }
    }

    /// Whether the fast path takes `frame`; when it does, it must agree with the reference.
    fn takes(frame: &str) -> bool {
        let fast = check_request(frame.as_bytes());
        if let Some(fast) = &fast {
            assert_eq!(Some(fast), reference(frame).as_ref(), "{frame}");
        }
        fast.is_some()
    }

    fn exec() -> Value {
        json!({"type": "tool-confirmation-request", "correlationId": "a",
               "toolCall": {"name": "run_shell_command", "args": {"command": "ls", "n": [1, -2]}},
               "details": {"type": "exec", "title": "T", "command": "ls", "rootCommand": "ls",
                           "rootCommands": ["ls"]},
               "outcomes": ["proceed_once", "proceed_always", "cancel"]})
    }

    #[test]
    fn takes_every_plain_kind_and_agrees() {
        let details = [
            json!({"type": "exec", "title": "T", "command": "ls\n", "rootCommand": "ls",
                   "rootCommands": ["ls"], "commands": [], "untrustedFlags": ["-f"]}),
            json!({"type": "edit", "title": "E", "fileName": "a", "filePath": "/a", "fileDiff": "@@ -1 +1 @@\n-a\n+b\n",
                   "originalContent": null, "newContent": "x\ty", "isModifying": false,
                   "diffStat": {"model_added_lines": 1, "model_removed_lines": 0, "model_added_chars": 1,
                                "model_removed_chars": 0, "user_added_lines": 0, "user_removed_lines": 0,
                                "user_added_chars": 0, "user_removed_chars": 0}}),
            json!({"type": "mcp", "title": "M", "serverName": "s", "toolName": "t", "toolDisplayName": "T",
                   "toolArgs": {"q": {"deep": [null]}}, "toolParameterSchema": 3}),
            json!({"type": "info", "title": "I", "prompt": "p", "urls": ["https://x"], "systemMessage": "m"}),
            json!({"type": "sandbox_expansion", "title": "S", "command": "c", "rootCommand": "c",
                   "additionalPermissions": {"fileSystem": {"read": ["/a"], "write": []}, "network": true}}),
            json!({"type": "exit_plan_mode", "title": "P", "planPath": "/plan.md", "future": {"x": 1}}),
            Value::Null,
        ];
        for d in details {
            let mut v = exec();
            v["details"] = d.clone();
            v["serverName"] = json!("srv \"q\"");
            v["subagent"] = json!(null);
            v["toolAnnotations"] = json!({"readOnlyHint": true});
            v["context"] = json!({"agent": "gemini-cli/0.61.0", "cwd": "/src",
                                  "approvalMode": "plan", "interactive": false});
            v["timeoutMs"] = json!(5000);
            assert!(takes(&v.to_string()), "{v}");
        }
        let mut bare = exec();
        bare.as_object_mut().unwrap().remove("details");
        bare.as_object_mut().unwrap().remove("outcomes");
        assert!(takes(&bare.to_string()));
        // Key order kept, escapes kept as serde writes them.
        let text = r#"{"toolCall":{"args":{"z":"\u001b[1m\\"},"name":"n\"x"},"type":"tool-confirmation-request","correlationId":"a"}"#;
        assert!(takes(text));
    }

    #[test]
    fn leaves_the_unusual_and_the_invalid_to_the_reference() {
        for text in [
            // Not canonical: whitespace, floats, escapes serde rewrites, repeated keys.
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name": "n"}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","args":{"x":1.5}}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","args":{"x":"\/"}}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","args":{"x":1,"x":2}}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","name":"m"}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"\u006e"}}"#,
            // Invalid.
            r#"{"type":"tool-confirmation-request","correlationId":"a"}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":""}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":1}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","args":[]}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n","id":null}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":"n"}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"serverName":1}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"toolAnnotations":[]}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"details":{"type":"exec","title":"T"}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"details":{"type":"shell","title":"T"}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"details":{"type":"info","title":"T","prompt":"p","systemMessage":null}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"outcomes":["cancel","cancel"]}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"outcomes":["always"]}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"outcomes":"cancel"}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"","toolCall":{"name":"n"}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","timeoutMs":0,"toolCall":{"name":"n"}}"#,
            // Valid, but read by the reference only.
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"details":{"type":"ask_user","title":"A","questions":[{"question":"Q?","header":"H","type":"text"}]}}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"outcomes":["\u0063ancel"]}"#,
            r#"{"type":"tool-confirmation-request","correlationId":"a","toolCall":{"name":"n"},"toolCall":{"name":"n"}}"#,
        ] {
            assert!(!takes(text), "{text}");
        }
    }

    #[test]
    fn a_taken_body_is_written_as_the_reference_writes_it() {
        let text = exec().to_string();
        let fast = check_request(text.as_bytes()).unwrap();
        let want = serde_json::to_string(&exec()["toolCall"]).unwrap();
        assert_eq!(&*fast.body.tool_call, want);
        assert_eq!(fast.body.tool(), "run_shell_command");
        assert_eq!(fast.body.details_type(), Some("exec"));
    }
}
