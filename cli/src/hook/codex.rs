//! Codex's hook contract (0.171): `PermissionRequest` as Claude Code's, but `allow` takes no
//! `updatedPermissions`/`updatedInput` (Codex fails closed on them); `PreToolUse` can only
//! deny, so approvals go through `PermissionRequest` alone. No decision (exit 0, no stdout)
//! leaves the call to Codex's own approval prompt.

use serde_json::{json, Map, Value};

use crate::fail::exit;

use super::agent::{Agent, AgentHook, Event, EventKind, Output};

pub struct Codex;

impl AgentHook for Codex {
    fn agent(&self) -> Agent {
        Agent::Codex
    }

    fn settings_file(&self) -> &'static str {
        ".codex/hooks.json"
    }

    fn install_event(&self) -> &'static str {
        "PermissionRequest"
    }

    /// Every permission request (no matcher); the timeout in seconds.
    fn entry(&self, command: &str, waiting: &str) -> Value {
        json!({"hooks": [{"type": "command", "command": command, "timeout": 600,
                          "statusMessage": waiting}]})
    }

    fn next_steps(&self) -> &'static str {
        "Next: trust the new hook in Codex (/hooks), then open a UI (`askbus ui`, or \
         `askbus notify` for your phone). With no UI open, Codex asks as before."
    }

    fn context_name(&self) -> &'static str {
        "codex"
    }

    /// Codex waits 10 minutes for a hook.
    fn default_timeout_ms(&self) -> u64 {
        590_000
    }

    fn event(&self, name: &str) -> Option<EventKind> {
        (name == "PermissionRequest").then_some(EventKind::PermissionRequest)
    }

    fn handles(&self) -> &'static str {
        "PermissionRequest (Codex's PreToolUse hooks cannot approve)"
    }

    fn mode(&self, input: &Map<String, Value>) -> (Option<&'static str>, Option<bool>) {
        // Its PermissionRequest input's `permission_mode` (default, acceptEdits, plan,
        // dontAsk, bypassPermissions); nothing in it says whether the run is headless.
        super::agent::permission_mode(input)
    }

    fn allow(&self, _event: Option<&Event>, _always: bool) -> Value {
        json!({"hookSpecificOutput": {
            "hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
    }

    fn hand_back(&self, _event: Option<&Event>, note: String) -> Output {
        Output {
            stdout: None,
            stderr: Some(super::agent::neutral(&note)),
            code: exit::OK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::tests::parse_ok;
    use super::super::agent::{parse, render, Request, Verdict};
    use super::*;

    #[test]
    fn permission_request_never_sends_what_codex_refuses() {
        let input = json!({"session_id": "s", "turn_id": "t", "transcript_path": "/t.jsonl",
                           "cwd": "/w", "hook_event_name": "PermissionRequest", "model": "gpt-5",
                           "permission_mode": "default", "tool_name": "Bash",
                           "tool_input": {"command": "rm -f /tmp/example"},
                           "permission_suggestions": [{"type": "addRules"}]});
        let e = parse_ok(Agent::Codex, input);
        assert_eq!((e.approval_mode, e.interactive), (Some("default"), None));
        let Request::Approval { fields, .. } = Codex.request(&e) else {
            panic!()
        };
        assert_eq!(fields["outcomes"], json!(["proceed_once", "cancel"]));
        let out = render(&Codex, Some(&e), Verdict::Allow { always: true });
        assert_eq!(
            out.stdout.as_deref(),
            Some(
                r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
            )
        );
        let mut pre = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"});
        pre["cwd"] = "/w".into();
        let err = parse(&Codex, pre.to_string().as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("handles PermissionRequest"),
            "{err}"
        );
    }
}
