//! Approvals: what a `tool-confirmation-request` must hold (the shapes of Gemini CLI core's
//! `FunctionCall` and `SerializableConfirmationDetails`, npm `@google/gemini-cli-core` 0.61.0),
//! which outcomes it offers, and what the agent is told when nobody approved. Pure functions,
//! shared by the daemon (which refuses bad requests) and clients (which can check first).
//!
//! [`check`] is the reference: it reads the frame's `Value` and words every error. `fast`
//! (behind the feature `fast`) is an optimisation of it for the daemon's hot path, which reads
//! the frame's text and either yields exactly what [`check`] would or gives up (debug builds
//! of the daemon assert it on every frame).

mod details;
#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod fast;

use serde_json::{Map, Value};

pub use details::check_details;

#[cfg(feature = "fast")]
use crate::protocol::UiApprovalRef;
use crate::protocol::{
    NoUiPolicy, Outcome, ProducerInfo, RequestContext, TimeoutMs, ToolConfirmationRequest,
    ToolOutcome, UiApproval,
};

/// Every `details.type` of the reference, in its declaration order.
pub const DETAIL_TYPES: [&str; 7] = [
    "sandbox_expansion",
    "info",
    "edit",
    "exec",
    "mcp",
    "ask_user",
    "exit_plan_mode",
];

/// An approval refused by [`check`]: the `invalid-request` message, naming the field, and
/// what its rejection is logged with.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub correlation_id: String,
    pub context: Option<Box<RequestContext>>,
    pub message: String,
}

/// An approval whose fields passed the checks, ready for the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidApproval {
    pub correlation_id: String,
    pub timeout_ms: Option<TimeoutMs>,
    pub no_ui: Option<NoUiPolicy>,
    pub context: Option<RequestContext>,
    pub body: ApprovalBody,
}

/// What UIs are shown of an approval (all but the envelope), as the producer sent it. The
/// JSON values are kept as the text serde_json writes for them, which every UI's frame copies
/// in as it is (so a broadcast or a replay never re-serializes them).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalBody {
    /// `toolCall`, as JSON text.
    pub tool_call: Box<str>,
    pub server_name: Option<String>,
    /// `toolAnnotations`, as JSON text.
    pub tool_annotations: Option<Box<str>>,
    pub subagent: Option<String>,
    /// `details`, as JSON text.
    pub details: Option<Box<str>>,
    /// The effective list: the producer's with `proceed_once` and `cancel` added, sorted.
    pub outcomes: Vec<ToolOutcome>,
    /// The JSON size of what UIs are shown, the memory it holds while pending.
    pub bytes: usize,
    /// `toolCall.name`, read once for telemetry and watchers.
    tool: Box<str>,
    /// `details.type`, when there are details.
    details_type: Option<&'static str>,
}

impl ApprovalBody {
    /// `toolCall.name`.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// `details.type`, when there are details.
    pub fn details_type(&self) -> Option<&'static str> {
        self.details_type
    }

    /// The frame a UI receives, with `timeout_ms` left: the reference of `Self::ui_frame_ref`
    /// (feature `fast`).
    pub fn ui_frame(
        &self,
        correlation_id: &str,
        timeout_ms: u64,
        producer: &ProducerInfo,
        context: Option<&RequestContext>,
    ) -> UiApproval {
        let value = |text: &str| -> Value {
            serde_json::from_str(text).expect("an approval body holds JSON text")
        };
        UiApproval {
            correlation_id: correlation_id.to_owned(),
            tool_call: value(&self.tool_call),
            server_name: self.server_name.clone(),
            tool_annotations: self.tool_annotations.as_deref().map(value),
            subagent: self.subagent.clone(),
            details: self.details.as_deref().map(value),
            outcomes: self.outcomes.clone(),
            timeout_ms,
            producer: producer.clone(),
            context: context.cloned(),
            node: None,
        }
    }

    /// The frame a UI receives, for the daemon's fast encoder (`UiApprovalRef::encode`);
    /// `node` is the origin's, once federated.
    #[cfg(feature = "fast")]
    #[doc(hidden)]
    pub fn ui_frame_ref<'a>(
        &'a self,
        correlation_id: &'a str,
        timeout_ms: u64,
        producer: &'a ProducerInfo,
        context: Option<&'a RequestContext>,
        node: Option<&'a str>,
    ) -> UiApprovalRef<'a> {
        UiApprovalRef {
            correlation_id,
            tool_call: &self.tool_call,
            server_name: self.server_name.as_deref(),
            tool_annotations: self.tool_annotations.as_deref(),
            subagent: self.subagent.as_deref(),
            details: self.details.as_deref(),
            outcomes: &self.outcomes,
            timeout_ms,
            producer,
            context,
            node,
        }
    }
}

/// Checks a request's tool call, details and outcomes in the documented order (its envelope,
/// context included, was checked by the parser);
/// the error is the `invalid-request` message, naming the field.
pub fn check(req: ToolConfirmationRequest) -> Result<ValidApproval, Refused> {
    let ToolConfirmationRequest {
        correlation_id,
        timeout_ms,
        no_ui,
        context,
        mut frame,
    } = req;
    match check_body(&mut frame) {
        Ok(body) => Ok(ValidApproval {
            correlation_id,
            timeout_ms,
            no_ui,
            context,
            body,
        }),
        Err(message) => Err(Refused {
            correlation_id,
            context: context.map(Box::new),
            message,
        }),
    }
}

fn check_body(frame: &mut Map<String, Value>) -> Result<ApprovalBody, String> {
    let (tool_call, tool) = match frame.remove("toolCall") {
        Some(Value::Object(call)) => {
            let tool = match call.get("name") {
                Some(Value::String(s)) if !s.is_empty() => Box::<str>::from(s.as_str()),
                Some(Value::String(_)) | None => {
                    return Err("toolCall.name must be a non-empty string".into())
                }
                Some(other) => {
                    return Err(format!(
                        "toolCall.name must be a string, not {}",
                        kind(other)
                    ))
                }
            };
            if let Some(args) = call.get("args") {
                if !args.is_object() {
                    return Err(format!(
                        "toolCall.args must be an object, not {}",
                        kind(args)
                    ));
                }
            }
            if let Some(id) = call.get("id") {
                if !id.is_string() {
                    return Err(format!("toolCall.id must be a string, not {}", kind(id)));
                }
            }
            (Value::Object(call), tool)
        }
        Some(other) => return Err(format!("toolCall must be an object, not {}", kind(&other))),
        None => return Err("tool-confirmation-request needs a \"toolCall\" object".into()),
    };
    let server_name = optional_string(frame, "serverName")?;
    let tool_annotations = match frame.remove("toolAnnotations") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v),
        Some(other) => {
            return Err(format!(
                "toolAnnotations must be an object, not {}",
                kind(&other)
            ))
        }
    };
    let subagent = optional_string(frame, "subagent")?;
    let details = match frame.remove("details") {
        None | Some(Value::Null) => None,
        Some(Value::Object(d)) => {
            check_details(&d)?;
            Some(Value::Object(d))
        }
        Some(other) => return Err(format!("details must be an object, not {}", kind(&other))),
    };
    let outcomes = match frame.remove("outcomes") {
        None | Some(Value::Null) => ToolOutcome::MINIMAL.to_vec(),
        Some(Value::Array(items)) => {
            let mut seen = ToolOutcome::MINIMAL.to_vec();
            let mut listed = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Some(o) = item.as_str().and_then(ToolOutcome::parse) else {
                    return Err(format!(
                        "outcomes[{i}] must be one of {}, not {}",
                        ToolOutcome::names(),
                        short(item)
                    ));
                };
                if listed.contains(&o) {
                    return Err(format!("outcomes lists {:?} twice", o.as_str()));
                }
                listed.push(o);
                if !seen.contains(&o) {
                    seen.push(o);
                }
            }
            seen.sort_unstable();
            seen
        }
        Some(other) => {
            return Err(format!(
                "outcomes must be an array of outcomes, not {}",
                kind(&other)
            ))
        }
    };
    let details_type = details
        .as_ref()
        .and_then(|d| d.get("type")?.as_str())
        .and_then(|ty| DETAIL_TYPES.into_iter().find(|t| *t == ty));
    let text = |v: &Value| -> Box<str> {
        serde_json::to_string(v)
            .expect("a Value serializes")
            .into_boxed_str()
    };
    Ok(ApprovalBody::new(
        text(&tool_call),
        server_name,
        tool_annotations.as_ref().map(text),
        subagent,
        details.as_ref().map(text),
        outcomes,
        tool,
        details_type,
    ))
}

impl ApprovalBody {
    /// A body of checked fields; `bytes` is what they hold.
    #[allow(clippy::too_many_arguments)]
    fn new(
        tool_call: Box<str>,
        server_name: Option<String>,
        tool_annotations: Option<Box<str>>,
        subagent: Option<String>,
        details: Option<Box<str>>,
        outcomes: Vec<ToolOutcome>,
        tool: Box<str>,
        details_type: Option<&'static str>,
    ) -> ApprovalBody {
        let bytes = tool_call.len()
            + tool_annotations.as_ref().map_or(0, |t| t.len())
            + details.as_ref().map_or(0, |t| t.len())
            + server_name.as_ref().map_or(0, String::len)
            + subagent.as_ref().map_or(0, String::len);
        ApprovalBody {
            tool_call,
            server_name,
            tool_annotations,
            subagent,
            details,
            outcomes,
            bytes,
            tool,
            details_type,
        }
    }
}

fn optional_string(frame: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match frame.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("{key} must be a string, not {}", kind(&other))),
    }
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

/// A value quoted for a message: strings as JSON, others by their kind.
fn short(v: &Value) -> String {
    match v {
        Value::String(s) => {
            let cut: String = s.chars().take(64).collect();
            let ellipsis = if cut.len() < s.len() { "…" } else { "" };
            format!("{cut:?}{ellipsis}")
        }
        other => kind(other).to_owned(),
    }
}

/// Why the agent's call was not approved, for every end but `answered` (which carries the
/// person's own text, if any). `timeout_ms` is the request's effective timeout.
pub fn daemon_message(reason: Outcome, timeout_ms: u64) -> Option<String> {
    Some(match reason {
        Outcome::Answered => return None,
        Outcome::Dismissed => "The user dismissed the confirmation without deciding, so the tool call was not approved.".into(),
        Outcome::Timeout => {
            let t = crate::questions::format_seconds(timeout_ms);
            let unit = if t == "1" { "second" } else { "seconds" };
            format!("Nobody approved the tool call within {t} {unit}, so it was not approved.")
        }
        Outcome::NoUi => "No user interface is connected to approve tool calls, so the tool call was not approved.".into(),
        Outcome::Withdrawn => "The confirmation request was withdrawn before anyone decided, so the tool call was not approved.".into(),
        Outcome::Shutdown => "The askbus daemon shut down before anyone decided, so the tool call was not approved.".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{parse_inbound, Inbound};
    use serde_json::json;

    fn check_frame(v: Value) -> Result<ValidApproval, String> {
        let Inbound::ToolConfirmationRequest(req) =
            parse_inbound(v.to_string().as_bytes()).unwrap()
        else {
            panic!("not an approval")
        };
        check(req).map_err(|r| r.message)
    }

    fn exec() -> Value {
        json!({"type": "tool-confirmation-request", "correlationId": "a",
               "toolCall": {"name": "run_shell_command", "args": {"command": "ls"}},
               "details": {"type": "exec", "title": "T", "command": "ls", "rootCommand": "ls",
                           "rootCommands": ["ls"]}})
    }

    #[test]
    fn a_minimal_request_offers_once_and_deny() {
        let ok = check_frame(exec()).unwrap();
        assert_eq!(ok.body.outcomes, ToolOutcome::MINIMAL.to_vec());
        assert_eq!(ok.body.tool(), "run_shell_command");
        assert_eq!(ok.body.details_type(), Some("exec"));
        let mut bare = exec();
        bare.as_object_mut().unwrap().remove("details");
        assert_eq!(check_frame(bare).unwrap().body.details, None);
    }

    #[test]
    fn outcomes_are_completed_sorted_and_checked() {
        let mut v = exec();
        v["outcomes"] = json!(["cancel", "proceed_always_tool"]);
        let ok = check_frame(v.clone()).unwrap();
        assert_eq!(
            ok.body.outcomes,
            vec![
                ToolOutcome::ProceedOnce,
                ToolOutcome::ProceedAlwaysTool,
                ToolOutcome::Cancel
            ]
        );
        v["outcomes"] = json!(["cancel", "cancel"]);
        assert_eq!(
            check_frame(v.clone()).unwrap_err(),
            "outcomes lists \"cancel\" twice"
        );
        v["outcomes"] = json!(["proceed_once", "always"]);
        assert!(check_frame(v.clone())
            .unwrap_err()
            .starts_with("outcomes[1] must be one of proceed_once, "));
        v["outcomes"] = json!("proceed_once");
        assert_eq!(
            check_frame(v).unwrap_err(),
            "outcomes must be an array of outcomes, not a string"
        );
    }

    #[test]
    fn every_error_names_its_field() {
        type Case = (fn(&mut Value), &'static str);
        let cases: Vec<Case> = vec![
            (|v| v["toolCall"] = json!("ls"), "toolCall must be an object, not a string"),
            (|v| { v.as_object_mut().unwrap().remove("toolCall"); },
             "tool-confirmation-request needs a \"toolCall\" object"),
            (|v| v["toolCall"]["name"] = json!(""), "toolCall.name must be a non-empty string"),
            (|v| v["toolCall"]["name"] = json!(3), "toolCall.name must be a string, not a number"),
            (|v| v["toolCall"]["args"] = json!([]), "toolCall.args must be an object, not an array"),
            (|v| v["serverName"] = json!(1), "serverName must be a string, not a number"),
            (|v| v["toolAnnotations"] = json!(true), "toolAnnotations must be an object, not a boolean"),
            (|v| v["subagent"] = json!([]), "subagent must be a string, not an array"),
            (|v| v["details"] = json!("exec"), "details must be an object, not a string"),
            (|v| v["details"]["type"] = json!("shell"),
             "details.type must be one of sandbox_expansion, info, edit, exec, mcp, ask_user, exit_plan_mode, not \"shell\""),
            (|v| { v["details"].as_object_mut().unwrap().remove("type"); }, "details needs a \"type\""),
            (|v| { v["details"].as_object_mut().unwrap().remove("rootCommand"); },
             "details.rootCommand is required for type \"exec\""),
            (|v| { v["details"].as_object_mut().unwrap().remove("title"); },
             "details.title is required for type \"exec\""),
            (|v| v["details"]["rootCommands"] = json!(["rm", 2]),
             "details.rootCommands[1] must be a string, not a number"),
            (|v| v["details"]["commands"] = json!("rm"),
             "details.commands must be an array of strings, not a string"),
            (|v| v["details"]["systemMessage"] = json!(null),
             "details.systemMessage must be a string, not null"),
        ];
        for (mutate, want) in cases {
            let mut v = exec();
            mutate(&mut v);
            assert_eq!(check_frame(v).unwrap_err(), want);
        }
    }

    #[test]
    fn each_details_kind_has_the_reference_shape() {
        let ok = [
            json!({"type": "edit", "title": "E", "fileName": "a", "filePath": "/a", "fileDiff": "",
                   "originalContent": null, "newContent": "x", "isModifying": false,
                   "diffStat": {"model_added_lines": 1, "model_removed_lines": 0, "model_added_chars": 1,
                                "model_removed_chars": 0, "user_added_lines": 0, "user_removed_lines": 0,
                                "user_added_chars": 0, "user_removed_chars": 0}}),
            json!({"type": "mcp", "title": "M", "serverName": "s", "toolName": "t", "toolDisplayName": "T",
                   "toolArgs": {}, "toolParameterSchema": 3}),
            json!({"type": "info", "title": "I", "prompt": "p", "urls": ["https://x"]}),
            json!({"type": "sandbox_expansion", "title": "S", "command": "c", "rootCommand": "c",
                   "additionalPermissions": {"fileSystem": {"read": ["/a"]}, "network": true}}),
            json!({"type": "ask_user", "title": "A", "questions": [{"question": "Q?", "header": "H", "type": "text"}]}),
            json!({"type": "exit_plan_mode", "title": "P", "planPath": "/plan.md"}),
        ];
        for d in ok {
            let mut v = exec();
            v["details"] = d.clone();
            assert!(check_frame(v).is_ok(), "{d}");
        }
        let bad = [
            (
                json!({"type": "edit", "title": "E", "fileName": "a", "filePath": "/a", "fileDiff": "",
                    "originalContent": 1, "newContent": "x"}),
                "details.originalContent must be a string or null, not a number",
            ),
            (
                json!({"type": "edit", "title": "E", "fileName": "a", "filePath": "/a", "fileDiff": "",
                    "originalContent": "", "newContent": "x", "diffStat": {"model_added_lines": 1}}),
                "details.diffStat.model_removed_lines is required",
            ),
            (
                json!({"type": "mcp", "title": "M", "serverName": "s", "toolName": "t", "toolDisplayName": "T",
                    "toolArgs": [1]}),
                "details.toolArgs must be an object, not an array",
            ),
            (
                json!({"type": "info", "title": "I"}),
                "details.prompt is required for type \"info\"",
            ),
            (
                json!({"type": "sandbox_expansion", "title": "S", "command": "c", "rootCommand": "c",
                    "additionalPermissions": {"network": "yes"}}),
                "details.additionalPermissions.network must be a boolean, not a string",
            ),
            (
                json!({"type": "sandbox_expansion", "title": "S", "command": "c", "rootCommand": "c",
                    "additionalPermissions": {"fileSystem": {"write": [1]}}}),
                "details.additionalPermissions.fileSystem.write[0] must be a string, not a number",
            ),
            (
                json!({"type": "ask_user", "title": "A", "questions": []}),
                "details.questions: params/questions must NOT have fewer than 1 items",
            ),
            (
                json!({"type": "exit_plan_mode", "title": "P"}),
                "details.planPath is required for type \"exit_plan_mode\"",
            ),
        ];
        for (d, want) in bad {
            let mut v = exec();
            v["details"] = d;
            assert_eq!(check_frame(v).unwrap_err(), want);
        }
    }

    #[test]
    fn the_agent_is_told_why_nothing_was_approved() {
        assert_eq!(daemon_message(Outcome::Answered, 1000), None);
        assert_eq!(
            daemon_message(Outcome::Timeout, 1000).unwrap(),
            "Nobody approved the tool call within 1 second, so it was not approved."
        );
        assert_eq!(
            daemon_message(Outcome::Timeout, 1500).unwrap(),
            "Nobody approved the tool call within 1.5 seconds, so it was not approved."
        );
        for o in [
            Outcome::Dismissed,
            Outcome::NoUi,
            Outcome::Withdrawn,
            Outcome::Shutdown,
        ] {
            assert!(daemon_message(o, 1).unwrap().ends_with("not approved."));
        }
    }
}
