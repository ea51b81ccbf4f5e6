//! Claude Code's hook contract (2.x, its hook schemas): `PreToolUse` answers with
//! `hookSpecificOutput.permissionDecision` `allow`/`deny`/`ask` and `permissionDecisionReason`;
//! `PermissionRequest` (the permission dialog) with `hookSpecificOutput.decision.behavior`
//! `allow` (optionally `updatedPermissions`, the dialog's "always" rules) or `deny`, or no
//! decision to show the dialog. Exit 2 blocks with stderr as the reason. `AskUserQuestion` is
//! answered by allowing it with `updatedInput` carrying `answers` (question text → chosen
//! label(s)).

use serde_json::{json, Map, Value};

use crate::fail::exit;

use super::agent::{approval, neutral, ok, Agent, AgentHook, Event, EventKind, Output, Request};

pub struct Claude;

impl AgentHook for Claude {
    fn agent(&self) -> Agent {
        Agent::Claude
    }

    fn settings_file(&self) -> &'static str {
        ".claude/settings.json"
    }

    fn install_event(&self) -> &'static str {
        "PreToolUse"
    }

    /// Commands, file changes, fetches, and Claude Code's own questions; the timeout in
    /// seconds; `statusMessage` shown while the hook runs.
    fn entry(&self, command: &str, waiting: &str) -> Value {
        json!({"matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit|WebFetch|AskUserQuestion",
               "hooks": [{"type": "command", "command": command, "timeout": 600,
                          "statusMessage": waiting}]})
    }

    fn next_steps(&self) -> &'static str {
        "Next: open a UI (`askbus ui`, or `askbus notify` for your phone). With no UI open, \
         Claude Code asks in its own terminal as before."
    }

    fn context_name(&self) -> &'static str {
        "claude-code"
    }

    /// Claude Code waits 10 minutes for a hook.
    fn default_timeout_ms(&self) -> u64 {
        590_000
    }

    fn event(&self, name: &str) -> Option<EventKind> {
        match name {
            "PreToolUse" => Some(EventKind::PreToolUse),
            "PermissionRequest" => Some(EventKind::PermissionRequest),
            _ => None,
        }
    }

    fn handles(&self) -> &'static str {
        "PreToolUse and PermissionRequest"
    }

    fn takes_suggestions(&self) -> bool {
        true
    }

    fn mode(&self, input: &Map<String, Value>) -> (Option<&'static str>, Option<bool>) {
        let (mode, interactive) = super::agent::permission_mode(input);
        let entry = std::env::var("CLAUDE_CODE_ENTRYPOINT").ok();
        (mode, interactive.or(interactive_of(entry.as_deref())))
    }

    fn request(&self, event: &Event) -> Request {
        if event.tool_name == "AskUserQuestion" {
            if let Some((questions, count)) = ask_user_questions(&event.tool_input) {
                let title = match event.tool_input["questions"][0]["question"].as_str() {
                    Some(q) => q.to_owned(),
                    None => "Claude Code asks".to_owned(),
                };
                return Request::Questions {
                    questions,
                    title,
                    count,
                };
            }
        }
        approval(event, self.offers_always(event))
    }

    /// "Allow always" is offered only where the answer can say it: the permission dialog
    /// takes the rules it suggested back as `updatedPermissions`.
    fn offers_always(&self, event: &Event) -> bool {
        event.kind == EventKind::PermissionRequest && !event.permission_suggestions.is_empty()
    }

    fn allow(&self, event: Option<&Event>, always: bool) -> Value {
        match event {
            Some(e) if e.kind == EventKind::PermissionRequest => {
                let mut decision = json!({"behavior": "allow"});
                if always {
                    decision["updatedPermissions"] = Value::Array(e.permission_suggestions.clone());
                }
                json!({"hookSpecificOutput": {
                    "hookEventName": "PermissionRequest", "decision": decision}})
            }
            _ => json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "Approved from askbus"}}),
        }
    }

    fn answered(&self, event: &Event, answers: Map<String, Value>) -> Output {
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
        ok(match event.kind {
            EventKind::PermissionRequest => json!({"hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow", "updatedInput": updated}}}),
            _ => json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "Answered from askbus",
                "updatedInput": updated}}),
        })
    }

    fn hand_back(&self, event: Option<&Event>, note: String) -> Output {
        let note = neutral(&note);
        match event.map(|e| e.kind) {
            Some(EventKind::PreToolUse) => ok(json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask",
                "permissionDecisionReason": note}})),
            // No decision: Claude Code shows its own permission dialog.
            _ => Output {
                stdout: None,
                stderr: Some(note),
                code: exit::OK,
            },
        }
    }
}

/// Claude Code's AskUserQuestion questions (`question`, `header`, `options` of `label` and
/// `description`, `multiSelect`) as ask_user `choice` questions, and how many; `None` if they
/// are not that shape (the call is then asked as an approval).
fn ask_user_questions(input: &Map<String, Value>) -> Option<(Value, usize)> {
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
    let count = out.len();
    Some((Value::Array(out), count))
}

/// Whether a person is at Claude Code's prompt, by the `CLAUDE_CODE_ENTRYPOINT` it sets for
/// itself and its hooks: `cli` interactive; `sdk-cli` (`claude -p`), `sdk-ts` and `sdk-py`
/// (the Agent SDK) headless; anything else (editors, remote) unsaid.
fn interactive_of(entrypoint: Option<&str>) -> Option<bool> {
    match entrypoint? {
        "cli" => Some(true),
        "sdk-cli" | "sdk-ts" | "sdk-py" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::agent::tests::parse_ok;
    use super::super::agent::{render, Verdict};
    use super::*;

    /// Claude Code's `PreToolUse` input (recorded from the real CLI, 2.1.197).
    fn claude_input() -> Value {
        json!({"session_id": "09005570-ba51", "transcript_path": "/h/.claude/projects/p/s.jsonl",
               "cwd": "/tmp/ct1/work", "prompt_id": "30d047bb", "permission_mode": "default",
               "effort": {"level": "high"}, "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": "touch created.txt", "description": "Create a file"},
               "tool_use_id": "toolu_01"})
    }

    #[test]
    fn permission_mode_and_entrypoint_become_the_mode_and_interactivity() {
        use super::super::agent::permission_mode;
        let mode = |m: &str| {
            let mut v = claude_input();
            v["permission_mode"] = m.into();
            permission_mode(v.as_object().unwrap())
        };
        assert_eq!(mode("default"), (Some("default"), None));
        assert_eq!(mode("acceptEdits"), (Some("autoEdit"), None));
        assert_eq!(mode("plan"), (Some("plan"), None));
        assert_eq!(mode("bypassPermissions"), (None, None));
        assert_eq!(mode("dontAsk"), (Some("default"), Some(false)));
        assert_eq!(mode("auto"), (None, None));
        let mut none = claude_input();
        none.as_object_mut().unwrap().remove("permission_mode");
        assert_eq!(permission_mode(none.as_object().unwrap()), (None, None));
        assert_eq!(interactive_of(Some("cli")), Some(true));
        assert_eq!(interactive_of(Some("sdk-cli")), Some(false));
        assert_eq!(interactive_of(Some("sdk-py")), Some(false));
        assert_eq!(interactive_of(Some("claude-vscode")), None);
        assert_eq!(interactive_of(None), None);
        let e = parse_ok(Agent::Claude, mode_input("acceptEdits"));
        assert_eq!(e.approval_mode, Some("autoEdit"));
    }

    fn mode_input(m: &str) -> Value {
        let mut v = claude_input();
        v["permission_mode"] = m.into();
        v
    }

    #[test]
    fn pre_tool_use() {
        let e = parse_ok(Agent::Claude, claude_input());
        assert_eq!(e.kind, EventKind::PreToolUse);
        let out = render(&Claude, Some(&e), Verdict::Allow { always: false });
        assert_eq!(
            serde_json::from_str::<Value>(out.stdout.as_deref().unwrap()).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                   "permissionDecision": "allow", "permissionDecisionReason": "Approved from askbus"}})
        );
        let out = render(
            &Claude,
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
            &Claude,
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
    fn permission_request_and_always() {
        let mut input = claude_input();
        input["hook_event_name"] = "PermissionRequest".into();
        let rule = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "touch:*"}],
                          "behavior": "allow", "destination": "localSettings"});
        input["permission_suggestions"] = json!([rule]);
        let e = parse_ok(Agent::Claude, input);
        let Request::Approval { fields, .. } = Claude.request(&e) else {
            panic!()
        };
        assert_eq!(
            fields["outcomes"],
            json!(["proceed_once", "proceed_always", "cancel"])
        );
        let out = render(&Claude, Some(&e), Verdict::Allow { always: true });
        assert_eq!(
            serde_json::from_str::<Value>(out.stdout.as_deref().unwrap()).unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                   "decision": {"behavior": "allow", "updatedPermissions": [rule]}}})
        );
        // Hand back: no decision, the dialog shows.
        let out = render(
            &Claude,
            Some(&e),
            Verdict::Undecided {
                why: "x.".into(),
                hand_back: true,
            },
        );
        assert_eq!((out.stdout, out.code), (None, 0));
    }

    #[test]
    fn ask_user_question_is_asked_and_answered() {
        let mut input = claude_input();
        input["tool_name"] = "AskUserQuestion".into();
        input["tool_input"] = json!({"questions": [
            {"question": "Which library?", "header": "Library", "multiSelect": false,
             "options": [{"label": "date-fns", "description": "small"},
                         {"label": "moment", "description": "big"}]},
            {"question": "Which features?", "header": "Features", "multiSelect": true,
             "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}]}]});
        let e = parse_ok(Agent::Claude, input.clone());
        let Request::Questions {
            questions,
            title,
            count,
        } = Claude.request(&e)
        else {
            panic!()
        };
        assert_eq!((title.as_str(), count), ("Which library?", 2));
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
        let out = render(&Claude, Some(&e), Verdict::Answers(answers));
        let v: Value = serde_json::from_str(out.stdout.as_deref().unwrap()).unwrap();
        assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "allow");
        let mut updated = input["tool_input"].clone();
        updated["answers"] = json!({"Which library?": "date-fns", "Which features?": "A, B"});
        assert_eq!(v["hookSpecificOutput"]["updatedInput"], updated);
    }
}
