//! What every agent's hook has in common, and the one trait each agent implements.
//!
//! An agent's hook contract is: what its hook reads on stdin, and how a decision is written
//! back (stdout JSON, stderr text, exit code). [`AgentHook`] is that contract; `gemini.rs`,
//! `claude.rs` and `codex.rs` each implement it as the agent's package states it. This file
//! holds what they share: the parsed [`Event`], the [`Request`] asked through askbusd, the
//! [`Verdict`] and how it becomes an [`Output`] ([`render`]), and the one place where every
//! string the hook writes for an agent's terminal or model is neutralized ([`neutral`]).

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use askbus::protocol::ToolOutcome;

use crate::fail::exit;

use super::details::{self, ToolCall};
use super::{claude, codex, gemini};

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
    /// The agent's hook contract.
    pub fn hook(self) -> &'static dyn AgentHook {
        match self {
            Agent::Gemini => &gemini::Gemini,
            Agent::Claude => &claude::Claude,
            Agent::Codex => &codex::Codex,
        }
    }

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Gemini => "gemini",
            Agent::Claude => "claude",
            Agent::Codex => "codex",
        }
    }

    /// The command, as error messages name it.
    pub fn command(self) -> String {
        format!("askbus hook {}", self.name())
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
    /// The agent's approval mode in Gemini CLI's spelling (`context.approvalMode`), when its
    /// input says it.
    pub approval_mode: Option<&'static str>,
    /// Whether a person is at the agent's own prompt (`context.interactive`), when known.
    pub interactive: Option<bool>,
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
        command: String,
        handles: &'static str,
        event: String,
    },
}

/// One agent's hook contract: how its stdin payload is read (`event`, `mcp`,
/// `takes_suggestions`, parsed by [`parse`]), what is asked for it (`request`), how the
/// decision is written back (`allow`, `answered`, `hand_back`, `block`), and where and how the
/// hook goes into its settings for --install (`settings_file`, `install_event`, `entry`,
/// `installed_timeout_ms`, `next_steps`). The defaults are the common case (an approval of the
/// tool call, blocked with exit 2 and the reason on stderr); each agent overrides what differs.
pub trait AgentHook: Sync {
    fn agent(&self) -> Agent;

    /// The agent's user settings file, relative to `$HOME`: where --install writes by default.
    fn settings_file(&self) -> &'static str;

    /// The hook event askbus's settings entry goes under.
    fn install_event(&self) -> &'static str;

    /// askbus's matcher group in the settings, running `command` (`waiting` is the line the
    /// agent shows while the hook waits).
    fn entry(&self, command: &str, waiting: &str) -> Value;

    /// The `--timeout-ms` an installed hook runs with when none is given: the agent's
    /// default is not always right for the timeout its settings entry sets.
    fn installed_timeout_ms(&self) -> Option<u64> {
        None
    }

    /// What to do after installing.
    fn next_steps(&self) -> &'static str;

    /// The name UIs show as the request's `context.agent`.
    fn context_name(&self) -> &'static str;

    /// How long a request waits when `--timeout-ms` is not given: under the agent's own
    /// default hook timeout, so the question ends (denied) before the agent gives up on it.
    fn default_timeout_ms(&self) -> u64;

    /// The event named `name`, if this hook handles it.
    fn event(&self, name: &str) -> Option<EventKind>;

    /// The events it handles, as an error message words them.
    fn handles(&self) -> &'static str;

    /// An MCP tool's server and own name, from the input or the tool's name.
    fn mcp(&self, input: &Map<String, Value>, tool_name: &str) -> Option<(String, String)> {
        let _ = input;
        // `mcp__<server>__<tool>`, as Claude Code and Codex name them.
        tool_name
            .strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .map(|(s, t)| (s.to_owned(), t.to_owned()))
    }

    /// The agent's approval mode (Gemini CLI's spelling) and whether a person is at its
    /// prompt, as far as its hook input and the environment its hooks run in say: unknown is
    /// `None` (the daemon's rules then read `default`, interactive).
    fn mode(&self, input: &Map<String, Value>) -> (Option<&'static str>, Option<bool>) {
        let _ = input;
        (None, None)
    }

    /// Whether the input's `permission_suggestions` mean something to this agent.
    fn takes_suggestions(&self) -> bool {
        false
    }

    /// What to ask through askbusd for `event`.
    fn request(&self, event: &Event) -> Request {
        approval(event, self.offers_always(event))
    }

    /// Whether "Allow always" can be said back to the agent for this call.
    fn offers_always(&self, event: &Event) -> bool {
        let _ = event;
        false
    }

    /// The stdout JSON that allows the call.
    fn allow(&self, event: Option<&Event>, always: bool) -> Value;

    /// The output for answered questions (index → answer); only Claude Code asks them.
    fn answered(&self, event: &Event, answers: Map<String, Value>) -> Output {
        let _ = (event, answers);
        self.block("askbus: this agent's hook asks no questions".into())
    }

    /// The output that hands the call back to the agent's own prompt, `note` saying why.
    fn hand_back(&self, event: Option<&Event>, note: String) -> Output;

    /// Whether handing the call back reaches a person: an agent without a prompt (headless)
    /// would wait for a confirmation that never comes, so the call is denied instead.
    fn can_prompt(&self) -> bool {
        true
    }

    /// Blocks the call: exit 2 with the reason on stderr, which every agent gives the model.
    fn block(&self, reason: String) -> Output {
        Output {
            stdout: None,
            stderr: Some(neutral(&reason)),
            code: exit::HOOK_BLOCK,
        }
    }
}

/// `s` made inert for a terminal, a model's context or a desktop: every string the hook
/// writes for the agent goes through this one function (stdout JSON and stderr alike).
pub fn neutral(s: &str) -> String {
    crate::term::sanitize(s).into_owned()
}

pub fn parse(hook: &dyn AgentHook, input: &[u8]) -> Result<Event, InputError> {
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
    let kind = hook.event(&event).ok_or_else(|| InputError::WrongEvent {
        command: hook.agent().command(),
        handles: hook.handles(),
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
    let mcp = hook.mcp(&obj, &tool_name);
    let (approval_mode, interactive) = hook.mode(&obj);
    let permission_suggestions = match obj.get("permission_suggestions") {
        Some(Value::Array(a)) if hook.takes_suggestions() => a.clone(),
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
        approval_mode,
        interactive,
    })
}

/// Claude Code's and Codex's `permission_mode` (both send it to their hooks) in Gemini CLI's
/// spelling: `acceptEdits` is `autoEdit`; `dontAsk` (deny what is not allowed beforehand,
/// never prompt) is `default` with nobody at the prompt. `bypassPermissions` is left unsaid,
/// as Gemini CLI's `--yolo` is: a person who skips the agent's own prompts and installs the
/// hook has made askbus the only gate, and `yolo` would make askbus allow everything. Other
/// modes (Claude Code's classifier `auto`) have no counterpart and are left unsaid too.
pub fn permission_mode(input: &Map<String, Value>) -> (Option<&'static str>, Option<bool>) {
    match input.get("permission_mode").and_then(Value::as_str) {
        Some("default") => (Some("default"), None),
        Some("acceptEdits") => (Some("autoEdit"), None),
        Some("plan") => (Some("plan"), None),
        Some("dontAsk") => (Some("default"), Some(false)),
        _ => (None, None),
    }
}

/// What to ask through askbusd for an event.
#[derive(Debug)]
pub enum Request {
    /// A `tool-confirmation-request`'s own fields (everything but the envelope), and the
    /// outcomes it offers (the only ones a reply may carry).
    Approval {
        fields: Map<String, Value>,
        title: String,
        offered: Vec<ToolOutcome>,
    },
    /// Questions (Claude Code's `AskUserQuestion`) as ask_user questions.
    Questions {
        questions: Value,
        title: String,
        count: usize,
    },
}

/// The approval of `event`'s tool call: its details, and Allow once (and always, where the
/// agent can be told so) or Deny.
pub fn approval(event: &Event, always: bool) -> Request {
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
    let mut offered = vec![ToolOutcome::ProceedOnce];
    if always {
        offered.push(ToolOutcome::ProceedAlways);
    }
    offered.push(ToolOutcome::Cancel);
    fields.insert(
        "outcomes".into(),
        offered.iter().map(|o| Value::from(o.as_str())).collect(),
    );
    Request::Approval {
        fields,
        title,
        offered,
    }
}

/// How the request ended, from the agent's point of view.
#[derive(Debug)]
pub enum Verdict {
    /// A person approved.
    Allow { always: bool },
    /// A person denied; the text is what the model is told.
    Deny { reason: String },
    /// Nobody decided (unreachable, timeout, no UI, dismissed, withdrawn, shutdown, refused,
    /// a contradictory reply, malformed input): never an approval. `why` says what happened.
    Undecided { why: String, hand_back: bool },
    /// Questions were answered: index → answer text.
    Answers(Map<String, Value>),
}

/// What the hook writes and how it exits.
#[derive(Debug, PartialEq)]
pub struct Output {
    pub stdout: Option<String>,
    /// Shown by the agent (and for exit 2, given to the model); already neutralized.
    pub stderr: Option<String>,
    pub code: u8,
}

pub fn render(hook: &dyn AgentHook, event: Option<&Event>, verdict: Verdict) -> Output {
    match verdict {
        Verdict::Allow { always } => ok(hook.allow(event, always)),
        Verdict::Answers(answers) => match event {
            Some(event) => hook.answered(event, answers),
            None => hook.block("askbus: no hook input to answer".into()),
        },
        Verdict::Deny { reason } => hook.block(reason),
        Verdict::Undecided {
            why,
            hand_back: true,
        } => {
            if hook.can_prompt() {
                hook.hand_back(event, format!("askbus: {why} Asking here instead."))
            } else {
                hook.block(format!(
                    "{why} (The agent runs without a terminal prompt to hand it back to.)"
                ))
            }
        }
        Verdict::Undecided { why, .. } => hook.block(why),
    }
}

pub fn ok(stdout: Value) -> Output {
    Output {
        stdout: Some(stdout.to_string()),
        stderr: None,
        code: exit::OK,
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn parse_ok(agent: Agent, v: Value) -> Event {
        parse(agent.hook(), v.to_string().as_bytes()).unwrap()
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
            let err = parse(Agent::Gemini.hook(), input.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(msg), "{input}: {err}");
        }
    }

    #[test]
    fn every_written_string_is_neutral() {
        let reason = "no\u{1b}]52;c;ZWNobw==\u{7}\u{202e}txt.exe";
        for agent in [Agent::Gemini, Agent::Claude, Agent::Codex] {
            let out = render(
                agent.hook(),
                None,
                Verdict::Deny {
                    reason: reason.into(),
                },
            );
            let all = format!("{:?}{:?}", out.stdout, out.stderr);
            let text = format!(
                "{}{}",
                out.stdout.unwrap_or_default(),
                out.stderr.unwrap_or_default()
            );
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{202e}']),
                "{agent:?}: {all}"
            );
            // JSON escapes would turn back into the raw characters once parsed.
            assert!(
                !text.contains("\\u001b") && !text.contains("\\u0007"),
                "{all}"
            );
        }
    }
}
