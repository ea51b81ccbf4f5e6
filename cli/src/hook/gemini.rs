//! Gemini CLI's hook contract (0.61.0, `bundle/docs/hooks/reference.md`; `hookRunner`,
//! `hookAggregator` and `evaluateBeforeToolHook` in the bundle): `BeforeTool` gets
//! `tool_name`, `tool_input`, `mcp_context`, `session_id`, `cwd`. Exit 0 with
//! `{"decision":"allow"}`; exit 2 blocks, stdout's JSON (else stderr) giving the `reason` the
//! model is told. `{"decision":"ask"}` forces Gemini's own confirmation prompt, which only an
//! interactive session has: headless, Gemini waits for a confirmation nobody can give. Any
//! other exit code (1 included) is a *warning* and the tool runs, so this hook never exits
//! with one.

use serde_json::{json, Map, Value};

use super::agent::{neutral, Agent, AgentHook, Event, EventKind, Output};
use crate::fail::exit;

pub struct Gemini;

impl AgentHook for Gemini {
    fn agent(&self) -> Agent {
        Agent::Gemini
    }

    fn settings_file(&self) -> &'static str {
        ".gemini/settings.json"
    }

    fn install_event(&self) -> &'static str {
        "BeforeTool"
    }

    /// Every tool but askbus's own MCP tool (asking a question needs no approval); the hook's
    /// timeout (ms) above the hook's own --timeout-ms. Gemini CLI shows the hook's `name`
    /// while it runs ("Executing Hook: …").
    fn entry(&self, command: &str, waiting: &str) -> Value {
        json!({"matcher": "^(?!mcp_askbus_).*", "hooks": [
            {"type": "command", "name": waiting, "command": command, "timeout": 600000}]})
    }

    /// Gemini CLI runs the tool when its hook timeout fires: the entry sets 600 s, and the
    /// hook's own wait is under it (its 55 s default is for Gemini's 60 s default).
    fn installed_timeout_ms(&self) -> Option<u64> {
        Some(590_000)
    }

    fn next_steps(&self) -> &'static str {
        "Next: open a UI (`askbus ui`, or `askbus notify` for your phone). With no UI open, \
         Gemini CLI asks in its own terminal as before (a headless run is denied). For a run \
         decided only through askbus: gemini --approval-mode yolo."
    }

    fn context_name(&self) -> &'static str {
        "gemini-cli"
    }

    /// Gemini CLI runs the tool when a hook times out (60 s by default).
    fn default_timeout_ms(&self) -> u64 {
        55_000
    }

    fn event(&self, name: &str) -> Option<EventKind> {
        (name == "BeforeTool").then_some(EventKind::BeforeTool)
    }

    fn handles(&self) -> &'static str {
        "BeforeTool"
    }

    fn mode(&self, _input: &Map<String, Value>) -> (Option<&'static str>, Option<bool>) {
        (None, gemini_interactive())
    }

    fn mcp(&self, input: &Map<String, Value>, _tool_name: &str) -> Option<(String, String)> {
        let m = input.get("mcp_context")?;
        let server = m.get("server_name")?.as_str()?;
        let tool = m.get("tool_name")?.as_str()?;
        Some((server.to_owned(), tool.to_owned()))
    }

    fn allow(&self, _event: Option<&Event>, _always: bool) -> Value {
        json!({"decision": "allow"})
    }

    fn hand_back(&self, _event: Option<&Event>, note: String) -> Output {
        Output {
            stdout: Some(json!({"decision": "ask", "systemMessage": neutral(&note)}).to_string()),
            stderr: None,
            code: exit::OK,
        }
    }

    /// Only an interactive Gemini CLI has a prompt to hand the call back to.
    fn can_prompt(&self) -> bool {
        interactive_gemini()
    }

    /// Gemini CLI reads stdout's JSON first when there is any, so the reason is there too.
    fn block(&self, reason: String) -> Output {
        let reason = neutral(&reason);
        Output {
            stdout: Some(json!({"decision": "deny", "reason": reason}).to_string()),
            stderr: Some(reason),
            code: exit::HOOK_BLOCK,
        }
    }
}

/// Whether the Gemini CLI that runs this hook is interactive, as its `isHeadlessMode` decides:
/// stdin and stdout terminals, no `-p`/`--prompt`, not under CI. It is found among this
/// process's ancestors (the hook runs under a shell, Gemini may have relaunched itself). When
/// it cannot be told (no /proc, no such ancestor), it is not: a call then is denied rather
/// than handed to a prompt that might never show.
pub fn interactive_gemini() -> bool {
    gemini_interactive().unwrap_or(false)
}

/// [`interactive_gemini`], `None` when it cannot be told: what the hook says as
/// `context.interactive` (Gemini CLI's hook input does not say it; its approval mode, which can
/// change while it runs, is left unsaid).
pub fn gemini_interactive() -> Option<bool> {
    let ci = |k: &str| std::env::var(k).is_ok_and(|v| v == "true");
    if (ci("CI") || ci("GITHUB_ACTIONS")) && !ci("GEMINI_CLI_INTEGRATION_TEST") {
        return Some(false);
    }
    let pid = ancestor(|argv| {
        argv.iter().take(3).any(|a| {
            let name = a.rsplit('/').next().unwrap_or(a);
            name == "gemini" || name == "gemini.js"
        })
    })?;
    let argv = cmdline(pid).unwrap_or_default();
    if argv
        .iter()
        .any(|a| a == "-p" || a == "--prompt" || a.starts_with("--prompt=") || a == "--acp")
    {
        return Some(false);
    }
    let tty = |fd: u32| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|p| {
            let p = p.to_string_lossy();
            p.starts_with("/dev/pts/") || p.starts_with("/dev/tty") || p == "/dev/console"
        })
    };
    Some(tty(0) && tty(1))
}

/// The nearest ancestor of this process (at most 8 up) whose command line `is`.
fn ancestor(is: impl Fn(&[String]) -> bool) -> Option<u32> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..8 {
        if pid <= 1 {
            return None;
        }
        if cmdline(pid).is_some_and(|argv| is(&argv)) {
            return Some(pid);
        }
        pid = parent_of(pid)?;
    }
    None
}

fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// The parent pid from `/proc/PID/stat` (the field after the parenthesized command name,
/// which may itself contain spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::agent::tests::parse_ok;
    use super::super::agent::{render, Request, Verdict};
    use super::*;

    /// The `BeforeTool` input Gemini CLI 0.61.0 sends (recorded from the real CLI).
    fn gemini_input() -> Value {
        json!({"session_id": "9c876a06", "transcript_path": "/h/.gemini/tmp/x/chats/s.json",
               "cwd": "/tmp/work", "hook_event_name": "BeforeTool",
               "timestamp": "2026-12-03T18:40:58.915Z", "tool_name": "run_shell_command",
               "tool_input": {"command": "touch created.txt", "description": "create a file"}})
    }

    #[test]
    fn allow_deny_and_hand_back() {
        let e = parse_ok(Agent::Gemini, gemini_input());
        assert_eq!(e.kind, EventKind::BeforeTool);
        assert_eq!(e.session.as_deref(), Some("9c876a06"));
        let out = render(&Gemini, Some(&e), Verdict::Allow { always: false });
        assert_eq!(
            out,
            Output {
                stdout: Some(r#"{"decision":"allow"}"#.into()),
                stderr: None,
                code: 0
            }
        );
        let out = render(
            &Gemini,
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
        let out = Gemini.hand_back(Some(&e), "askbusd is down.".into());
        assert_eq!(out.code, 0);
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["decision"], "ask");
        // Not run by an interactive Gemini CLI (this test is not): a hand-back denies.
        let out = render(
            &Gemini,
            Some(&e),
            Verdict::Undecided {
                why: "askbusd is down.".into(),
                hand_back: true,
            },
        );
        assert_eq!(out.code, 2);
        assert!(out.stderr.unwrap().contains("without a terminal prompt"));
    }

    #[test]
    fn the_approval_asked_for_a_shell_call() {
        let e = parse_ok(Agent::Gemini, gemini_input());
        let Request::Approval { fields, title, .. } = Gemini.request(&e) else {
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
        let Request::Approval { fields, .. } = Gemini.request(&e) else {
            panic!()
        };
        assert_eq!(fields["serverName"], "github");
        assert_eq!(fields["details"]["type"], "mcp");
    }

    #[test]
    fn the_parent_pid_is_read_past_a_command_name_with_parentheses() {
        let me = std::process::id();
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
    }
}
