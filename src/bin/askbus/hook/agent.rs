//! Each agent's hook contract: what its hook reads on stdin, and how a decision is written back
//! (stdout JSON, stderr text, exit code). The contracts, as the packages state them:
//!
//! - **Gemini CLI** 0.61.0 (`bundle/docs/hooks/reference.md`; `hookRunner`, `hookAggregator`
//!   and `evaluateBeforeToolHook` in the bundle): `BeforeTool` gets `tool_name`, `tool_input`,
//!   `mcp_context`, `session_id`, `cwd`. Exit 0 with `{"decision":"allow"}`; exit 2 blocks,
//!   stdout's JSON (else stderr) giving the `reason` the model is told. `{"decision":"ask"}`
//!   forces Gemini's own confirmation prompt. Any other exit code (1 included) is a *warning*
//!   and the tool runs, so this hook never exits with one.
//! - **Claude Code** 2.x (its hook schemas): `PreToolUse` answers with
//!   `hookSpecificOutput.permissionDecision` `allow`/`deny`/`ask` and
//!   `permissionDecisionReason`; `PermissionRequest` (the permission dialog) with
//!   `hookSpecificOutput.decision.behavior` `allow` (optionally `updatedPermissions`, the
//!   dialog's "always" rules) or `deny`, or no decision to show the dialog. Exit 2 blocks with
//!   stderr as the reason. `AskUserQuestion` is answered by allowing it with `updatedInput`
//!   carrying `answers` (question text → chosen label(s)).
//! - **Codex** 0.171: `PermissionRequest` as Claude Code's, but `allow` takes no
//!   `updatedPermissions`/`updatedInput` (Codex fails closed on them); `PreToolUse` can only
//!   deny, so approvals go through `PermissionRequest` alone.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use askbusd::protocol::ToolOutcome;

use super::details::{self, ToolCall};

/// The agents whose hooks this speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Gemini CLI: a `BeforeTool` hook
    Gemini,
    /// Claude Code: a `PreToolUse` or `PermissionRequest` hook
    Claude,
    /// Codex: a `PermissionRequest` hook
    Codex,
}

impl Agent {
    /// The name UIs show as the request's `context.agent`.
    pub fn context_name(self) -> &'static str {
        match self {
            Agent::Gemini => "gemini-cli",
            Agent::Claude => "claude-code",
            Agent::Codex => "codex",
        }
    }

    /// The command, as error messages name it.
    pub fn command(self) -> &'static str {
        match self {
            Agent::Gemini => "askbus hook gemini",
            Agent::Claude => "askbus hook claude",
            Agent::Codex => "askbus hook codex",
        }
    }

    /// How long a request waits when `--timeout-ms` is not given: under the agent's own
    /// default hook timeout, so the question ends (denied) before the agent gives up on the
    /// hook. Gemini CLI runs the tool when a hook times out (60 s by default); Claude Code and
    /// Codex wait 10 minutes.
    pub fn default_timeout_ms(self) -> u64 {
        match self {
            Agent::Gemini => 55_000,
            Agent::Claude | Agent::Codex => 590_000,
        }
    }
}

/// Which hook event fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    BeforeTool,
    PreToolUse,
    PermissionRequest,
}

/// The hook's input, as far as the decision needs it.
#[derive(Debug)]
pub struct Event {
    pub kind: EventKind,
    pub tool_name: String,
    pub tool_input: Map<String, Value>,
    pub session: Option<String>,
    pub cwd: PathBuf,
    /// An MCP tool's server and own name.
    pub mcp: Option<(String, String)>,
    /// Claude Code's `PermissionRequest`: the rules its dialog's "always" would add.
    pub permission_suggestions: Vec<Value>,
}

/// Why an input cannot be decided on (it is then denied).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the hook input is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the hook input is not a JSON object")]
    NotObject,
    #[error("the hook input has no {0}")]
    Missing(&'static str),
    #[error("the hook input's {0} is not {1}")]
    Type(&'static str, &'static str),
    #[error(
        "{command} handles {handles}, not {event:?}: change the hook's event in the agent's \
         settings"
    )]
    WrongEvent {
        command: &'static str,
        handles: &'static str,
        event: String,
    },
}

pub fn parse(agent: Agent, input: &[u8]) -> Result<Event, InputError> {
    let value: Value = serde_json::from_slice(input).map_err(InputError::NotJson)?;
    let Value::Object(obj) = value else {
        return Err(InputError::NotObject);
    };
    let string = |k: &'static str| -> Result<Option<String>, InputError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(InputError::Type(k, "a string")),
        }
    };
    let event = string("hook_event_name")?.ok_or(InputError::Missing("hook_event_name"))?;
    let (kind, handles) = match agent {
        Agent::Gemini => (
            (event == "BeforeTool").then_some(EventKind::BeforeTool),
            "BeforeTool",
        ),
        Agent::Claude => (
            match event.as_str() {
                "PreToolUse" => Some(EventKind::PreToolUse),
                "PermissionRequest" => Some(EventKind::PermissionRequest),
                _ => None,
            },
            "PreToolUse and PermissionRequest",
        ),
        Agent::Codex => (
            (event == "PermissionRequest").then_some(EventKind::PermissionRequest),
            "PermissionRequest (Codex's PreToolUse hooks cannot approve)",
        ),
    };
    let kind = kind.ok_or(InputError::WrongEvent {
        command: agent.command(),
        handles,
        event,
    })?;
    let tool_name = string("tool_name")?.ok_or(InputError::Missing("tool_name"))?;
    if tool_name.is_empty() {
        return Err(InputError::Missing("tool_name"));
    }
    let tool_input = match obj.get("tool_input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(InputError::Type("tool_input", "an object")),
    };
    let cwd = match string("cwd")? {
        Some(c) => PathBuf::from(c),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    let mcp = match agent {
        Agent::Gemini => obj.get("mcp_context").and_then(|m| {
            let server = m.get("server_name")?.as_str()?;
            let tool = m.get("tool_name")?.as_str()?;
            Some((server.to_owned(), tool.to_owned()))
        }),
        // `mcp__<server>__<tool>`.
        Agent::Claude | Agent::Codex => tool_name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .map(|(s, t)| (s.to_owned(), t.to_owned())),
    };
    let permission_suggestions = match obj.get("permission_suggestions") {
        Some(Value::Array(a)) if agent == Agent::Claude => a.clone(),
        _ => Vec::new(),
    };
    Ok(Event {
        kind,
        tool_name,
        tool_input,
        session: string("session_id")?,
        cwd,
        mcp,
        permission_suggestions,
    })
}

/// What to ask through askbusd for an event.
#[derive(Debug)]
pub enum Request {
    /// A `tool-confirmation-request`'s own fields (everything but the envelope).
    Approval {
        fields: Map<String, Value>,
        title: String,
    },
    /// Claude Code's `AskUserQuestion`: its questions as ask_user questions.
    Questions { questions: Value, title: String },
}

pub fn request(agent: Agent, event: &Event) -> Request {
    if agent == Agent::Claude && event.tool_name == "AskUserQuestion" {
        if let Some(questions) = ask_user_questions(&event.tool_input) {
            let title = match event.tool_input["questions"][0]["question"].as_str() {
                Some(q) => q.to_owned(),
                None => "Claude Code asks".to_owned(),
            };
            return Request::Questions { questions, title };
        }
    }
    let call = ToolCall {
        name: &event.tool_name,
        args: &event.tool_input,
        cwd: &event.cwd,
        mcp: event.mcp.clone(),
    };
    let (details, title) = details::details(&call);
    let mut fields = Map::new();
    fields.insert(
        "toolCall".into(),
        json!({"name": event.tool_name, "args": event.tool_input}),
    );
    if let Some((server, _)) = &event.mcp {
        fields.insert("serverName".into(), server.clone().into());
    }
    if let Some(d) = details {
        fields.insert("details".into(), d);
    }
    let mut outcomes = vec![ToolOutcome::ProceedOnce];
    if always_supported(agent, event) {
        outcomes.push(ToolOutcome::ProceedAlways);
    }
    outcomes.push(ToolOutcome::Cancel);
    fields.insert(
        "outcomes".into(),
        outcomes.iter().map(|o| Value::from(o.as_str())).collect(),
    );
    Request::Approval { fields, title }
}

/// "Allow always" is offered only where the answer can say it: Claude Code's permission dialog
/// takes the rules it suggested back as `updatedPermissions`.
fn always_supported(agent: Agent, event: &Event) -> bool {
    agent == Agent::Claude
        && event.kind == EventKind::PermissionRequest
        && !event.permission_suggestions.is_empty()
}

/// Claude Code's AskUserQuestion questions (`question`, `header`, `options` of `label` and
/// `description`, `multiSelect`) as ask_user `choice` questions; `None` if they are not that
/// shape (the call is then asked as an approval).
fn ask_user_questions(input: &Map<String, Value>) -> Option<Value> {
    let questions = input.get("questions")?.as_array()?;
    let mut out = Vec::with_capacity(questions.len());
    for q in questions {
        let q = q.as_object()?;
        let mut item = Map::new();
        item.insert("question".into(), q.get("question")?.as_str()?.into());
        if let Some(h) = q.get("header").and_then(Value::as_str) {
            item.insert("header".into(), h.into());
        }
        item.insert("type".into(), "choice".into());
        let options: Option<Vec<Value>> = q
            .get("options")?
            .as_array()?
            .iter()
            .map(|o| {
                let label = o.get("label")?.as_str()?;
                let description = o.get("description").and_then(Value::as_str).unwrap_or("");
                Some(json!({"label": label, "description": description}))
            })
            .collect();
        item.insert("options".into(), Value::Array(options?));
        if q.get("multiSelect").and_then(Value::as_bool) == Some(true) {
            item.insert("multiSelect".into(), true.into());
        }
        out.push(Value::Object(item));
    }
    Some(Value::Array(out))
}

/// How the request ended, from the agent's point of view.
#[derive(Debug)]
pub enum Verdict {
    /// A person approved.
    Allow { always: bool },
    /// A person denied; the text is what the model is told.
    Deny { reason: String },
    /// Nobody decided (unreachable, timeout, no UI, dismissed, withdrawn, shutdown, refused,
    /// malformed input): never an approval. `why` says what happened.
    Undecided { why: String, hand_back: bool },
    /// Claude Code's AskUserQuestion was answered: index → answer text.
    Answers(Map<String, Value>),
}

/// What the hook writes and how it exits.
#[derive(Debug, PartialEq)]
pub struct Output {
    pub stdout: Option<String>,
    /// Shown by the agent (and for exit 2, given to the model); passed through
    /// `term::sanitize` when written.
    pub stderr: Option<String>,
    pub code: u8,
}

/// The exit code that blocks the tool call in every agent.
pub const EXIT_BLOCK: u8 = 2;

pub fn render(agent: Agent, event: Option<&Event>, verdict: Verdict) -> Output {
    let kind = event.map(|e| e.kind);
    match verdict {
        Verdict::Allow { always } => {
            let stdout = match (agent, kind) {
                (Agent::Gemini, _) => json!({"decision": "allow"}),
                (_, Some(EventKind::PermissionRequest)) => {
                    let mut decision = json!({"behavior": "allow"});
                    if always && agent == Agent::Claude {
                        if let Some(e) = event {
                            decision["updatedPermissions"] =
                                Value::Array(e.permission_suggestions.clone());
                        }
                    }
                    json!({"hookSpecificOutput": {
                        "hookEventName": "PermissionRequest", "decision": decision}})
                }
                _ => json!({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": "Approved from askbus"}}),
            };
            ok(stdout)
        }
        Verdict::Answers(answers) => {
            // Only Claude Code asks questions through this hook.
            let Some(event) = event else {
                return block(agent, "askbus: no hook input to answer".into());
            };
            let mut by_question = Map::new();
            if let Some(questions) = event.tool_input.get("questions").and_then(Value::as_array) {
                for (i, q) in questions.iter().enumerate() {
                    if let (Some(text), Some(answer)) = (
                        q.get("question").and_then(Value::as_str),
                        answers.get(&i.to_string()),
                    ) {
                        by_question.insert(text.to_owned(), answer.clone());
                    }
                }
            }
            let mut updated = event.tool_input.clone();
            updated.insert("answers".into(), Value::Object(by_question));
            let out = match event.kind {
                EventKind::PermissionRequest => json!({"hookSpecificOutput": {
                    "hookEventName": "PermissionRequest",
                    "decision": {"behavior": "allow", "updatedInput": updated}}}),
                _ => json!({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": "Answered from askbus",
                    "updatedInput": updated}}),
            };
            ok(out)
        }
        Verdict::Deny { reason } => block(agent, reason),
        Verdict::Undecided {
            why,
            hand_back: false,
        } => block(agent, why),
        Verdict::Undecided {
            why,
            hand_back: true,
        } => {
            let note = format!("askbus: {why} Asking here instead.");
            match (agent, kind) {
                (Agent::Gemini, _) => Output {
                    stdout: Some(json!({"decision": "ask", "systemMessage": note}).to_string()),
                    stderr: None,
                    code: 0,
                },
                (Agent::Claude, Some(EventKind::PreToolUse)) => ok(json!({"hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": note}})),
                // No decision: the agent shows its own permission dialog.
                _ => Output {
                    stdout: None,
                    stderr: Some(note),
                    code: 0,
                },
            }
        }
    }
}

fn ok(stdout: Value) -> Output {
    Output {
        stdout: Some(stdout.to_string()),
        stderr: None,
        code: 0,
    }
}

/// Blocks the call: exit 2 with the reason on stderr, which every agent gives the model.
/// Gemini CLI reads stdout's JSON first when there is any, so it gets the same reason there.
fn block(agent: Agent, reason: String) -> Output {
    let stdout =
        (agent == Agent::Gemini).then(|| json!({"decision": "deny", "reason": reason}).to_string());
    Output {
        stdout,
        stderr: Some(reason),
        code: EXIT_BLOCK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(agent: Agent, v: Value) -> Event {
        parse(agent, v.to_string().as_bytes()).unwrap()
    }

    /// The `BeforeTool` input Gemini CLI 0.61.0 sends (recorded from the real CLI).
    fn gemini_input() -> Value {
        json!({"session_id": "9c876a06", "transcript_path": "/h/.gemini/tmp/x/chats/s.json",
               "cwd": "/tmp/work", "hook_event_name": "BeforeTool",
               "timestamp": "2026-12-03T18:40:58.915Z", "tool_name": "run_shell_command",
               "tool_input": {"command": "touch created.txt", "description": "create a file"}})
    }

    /// Claude Code's `PreToolUse` input (recorded from the real CLI, 2.1.197).
    fn claude_input() -> Value {
        json!({"session_id": "09005570-ba51", "transcript_path": "/h/.claude/projects/p/s.jsonl",
               "cwd": "/tmp/ct1/work", "prompt_id": "30d047bb", "permission_mode": "default",
               "effort": {"level": "high"}, "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "touch created.txt", "description": "Create a file"},
               "tool_use_id": "toolu_01"})
    }

    #[test]
    fn gemini_allow_deny_and_hand_back() {
        let e = parse_ok(Agent::Gemini, gemini_input());
        assert_eq!(e.kind, EventKind::BeforeTool);
        assert_eq!(e.session.as_deref(), Some("9c876a06"));
        let out = render(Agent::Gemini, Some(&e), Verdict::Allow { always: false });
        assert_eq!(
            out,
            Output {
                stdout: Some(r#"{"decision":"allow"}"#.into()),
                stderr: None,
                code: 0
            }
        );
        let out = render(
            Agent::Gemini,
            Some(&e),
            Verdict::Deny {
                reason: "not now".into(),
            },
        );
        assert_eq!(out.code, 2);
        assert_eq!(
            out.stdout.as_deref(),
            Some(r#"{"decision":"deny","reason":"not now"}"#)
        );
        assert_eq!(out.stderr.as_deref(), Some("not now"));
        let out = render(
            Agent::Gemini,
            Some(&e),
            Verdict::Undecided {
                why: "askbusd is down.".into(),
                hand_back: true,
            },
        );
        assert_eq!(out.code, 0);
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["decision"], "ask");
        let out = render(
            Agent::Gemini,
            Some(&e),
            Verdict::Undecided {
                why: "askbusd is down.".into(),
                hand_back: false,
            },
        );
        assert_eq!(out.code, 2);
    }

    #[test]
    fn the_approval_asked_for_a_gemini_shell_call() {
        let e = parse_ok(Agent::Gemini, gemini_input());
        let Request::Approval { fields, title } = request(Agent::Gemini, &e) else {
            panic!("an approval")
        };
        assert_eq!(title, "Run `touch created.txt`");
        assert_eq!(
            Value::Object(fields),
            json!({
                "toolCall": {"name": "run_shell_command",
                             "args": {"command": "touch created.txt", "description": "create a file"}},
                "details": {"type": "exec", "title": "Confirm Shell Command",
                            "command": "touch created.txt", "rootCommand": "touch",
                            "rootCommands": ["touch"]},
                "outcomes": ["proceed_once", "cancel"],
            })
        );
        let mut mcp = gemini_input();
        mcp["tool_name"] = "mcp_github_search".into();
        mcp["mcp_context"] =
            json!({"server_name": "github", "tool_name": "search", "command": "gh"});
        let e = parse_ok(Agent::Gemini, mcp);
        let Request::Approval { fields, .. } = request(Agent::Gemini, &e) else {
            panic!()
        };
        assert_eq!(fields["serverName"], "github");
        assert_eq!(fields["details"]["type"], "mcp");
    }

    #[test]
    fn claude_pre_tool_use() {
        let e = parse_ok(Agent::Claude, claude_input());
        assert_eq!(e.kind, EventKind::PreToolUse);
        let out = render(Agent::Claude, Some(&e), Verdict::Allow { always: false });
        assert_eq!(
            serde_json::from_str::<Value>(out.stdout.as_deref().unwrap()).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                   "permissionDecision": "allow", "permissionDecisionReason": "Approved from askbus"}})
        );
        let out = render(
            Agent::Claude,
            Some(&e),
            Verdict::Deny {
                reason: "no".into(),
            },
        );
        assert_eq!(
            out,
            Output {
                stdout: None,
                stderr: Some("no".into()),
                code: 2
            }
        );
        let out = render(
            Agent::Claude,
            Some(&e),
            Verdict::Undecided {
                why: "Nobody answered.".into(),
                hand_back: true,
            },
        );
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask");
        assert_eq!(
            v["hookSpecificOutput"]["permissionDecisionReason"],
            "askbus: Nobody answered. Asking here instead."
        );
    }

    #[test]
    fn claude_permission_request_and_always() {
        let mut input = claude_input();
        input["hook_event_name"] = "PermissionRequest".into();
        let rule = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "touch:*"}],
                          "behavior": "allow", "destination": "localSettings"});
        input["permission_suggestions"] = json!([rule]);
        let e = parse_ok(Agent::Claude, input);
        let Request::Approval { fields, .. } = request(Agent::Claude, &e) else {
            panic!()
        };
        assert_eq!(
            fields["outcomes"],
            json!(["proceed_once", "proceed_always", "cancel"])
        );
        let out = render(Agent::Claude, Some(&e), Verdict::Allow { always: true });
        assert_eq!(
            serde_json::from_str::<Value>(out.stdout.as_deref().unwrap()).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                   "decision": {"behavior": "allow", "updatedPermissions": [rule]}}})
        );
        // Hand back: no decision, the dialog shows.
        let out = render(
            Agent::Claude,
            Some(&e),
            Verdict::Undecided {
                why: "x.".into(),
                hand_back: true,
            },
        );
        assert_eq!((out.stdout, out.code), (None, 0));
    }

    #[test]
    fn codex_permission_request_never_sends_what_codex_refuses() {
        let input = json!({"session_id": "s", "turn_id": "t", "transcript_path": "/t.jsonl",
                           "cwd": "/w", "hook_event_name": "PermissionRequest", "model": "gpt-5",
                           "permission_mode": "default", "tool_name": "Bash",
                           "tool_input": {"command": "rm -f /tmp/example"},
                           "permission_suggestions": [{"type": "addRules"}]});
        let e = parse_ok(Agent::Codex, input);
        let Request::Approval { fields, .. } = request(Agent::Codex, &e) else {
            panic!()
        };
        assert_eq!(fields["outcomes"], json!(["proceed_once", "cancel"]));
        let out = render(Agent::Codex, Some(&e), Verdict::Allow { always: true });
        assert_eq!(
            out.stdout.as_deref(),
            Some(
                r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
            )
        );
        let mut pre = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"});
        pre["cwd"] = "/w".into();
        let err = parse(Agent::Codex, pre.to_string().as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("handles PermissionRequest"),
            "{err}"
        );
    }

    #[test]
    fn claude_ask_user_question_is_asked_and_answered() {
        let mut input = claude_input();
        input["tool_name"] = "AskUserQuestion".into();
        input["tool_input"] = json!({"questions": [
            {"question": "Which library?", "header": "Library", "multiSelect": false,
             "options": [{"label": "date-fns", "description": "small"},
                         {"label": "moment", "description": "big"}]},
            {"question": "Which features?", "header": "Features", "multiSelect": true,
             "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]}]});
        let e = parse_ok(Agent::Claude, input.clone());
        let Request::Questions { questions, title } = request(Agent::Claude, &e) else {
            panic!()
        };
        assert_eq!(title, "Which library?");
        assert_eq!(
            questions,
            json!([
                {"question": "Which library?", "header": "Library", "type": "choice",
                 "options": [{"label": "date-fns", "description": "small"},
                             {"label": "moment", "description": "big"}]},
                {"question": "Which features?", "header": "Features", "type": "choice",
                 "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
                 "multiSelect": true}])
        );
        let answers = json!({"0": "date-fns", "1": "A, B"})
            .as_object()
            .unwrap()
            .clone();
        let out = render(Agent::Claude, Some(&e), Verdict::Answers(answers));
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
        let mut updated = input["tool_input"].clone();
        updated["answers"] = json!({"Which library?": "date-fns", "Which features?": "A, B"});
        assert_eq!(v["hookSpecificOutput"]["updatedInput"], updated);
    }

    #[test]
    fn malformed_inputs_are_errors() {
        for (input, msg) in [
            ("not json", "not JSON"),
            ("[1]", "not a JSON object"),
            ("{}", "has no hook_event_name"),
            (
                r#"{"hook_event_name":"AfterTool"}"#,
                "handles BeforeTool, not \"AfterTool\"",
            ),
            (r#"{"hook_event_name":"BeforeTool"}"#, "has no tool_name"),
            (
                r#"{"hook_event_name":"BeforeTool","tool_name":""}"#,
                "has no tool_name",
            ),
            (
                r#"{"hook_event_name":"BeforeTool","tool_name":"x","tool_input":[]}"#,
                "tool_input is not an object",
            ),
            (
                r#"{"hook_event_name":"BeforeTool","tool_name":7}"#,
                "tool_name is not a string",
            ),
        ] {
            let err = parse(Agent::Gemini, input.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(msg), "{input}: {err}");
        }
    }
}
