//! `session/request_permission` as an askbus approval: the ACP tool call (kind, title,
//! content, locations) as a `tool-confirmation-request` (`edit` details for a diff, `exec`
//! for a terminal command, `info` for the rest), the ACP options as the outcomes a person may
//! pick, and the person's decision back as the `optionId` the agent offered for it.

use std::path::Path;

use serde_json::{json, Map, Value};

use askbus::client::{Confirm, Confirmation, ConfirmationReason};
use askbus::protocol::{Outcome, ToolOutcome};

use super::Decision;

/// A permission request as askbus asks it, and how its answer goes back.
#[derive(Debug, Clone)]
pub struct Permission {
    /// What askbus asks (without correlationId, timeout and context: the relay sets those).
    pub confirm: Confirm,
    /// The tool call's title, one line, for the request's `context.title`.
    pub title: String,
    pub options: OptionMap,
}

/// The ACP options by the askbus outcome each one is: which `optionId` a decision selects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionMap {
    /// Each outcome offered, with the agent's optionId for it (first option of a kind wins).
    chosen: Vec<(ToolOutcome, String)>,
    /// Every optionId the agent offered: the editor may answer with any of them.
    offered: Vec<String>,
}

impl OptionMap {
    /// Maps ACP options: `allow_once` → `proceed_once`, `allow_always` → `proceed_always`,
    /// `reject_once` (else `reject_always`) → `cancel`. An option whose id is itself an askbus
    /// outcome of the same sense (Gemini CLI names them so: `proceed_always_server`, …) keeps
    /// that outcome. Options of an outcome already taken are left to the editor.
    pub fn from_options(options: &[Value]) -> Result<OptionMap, String> {
        let mut chosen: Vec<(ToolOutcome, String)> = Vec::new();
        let mut reject_always = None;
        let offered = options
            .iter()
            .filter_map(|o| o.get("optionId").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        for o in options {
            let (Some(id), Some(kind)) = (
                o.get("optionId").and_then(Value::as_str),
                o.get("kind").and_then(Value::as_str),
            ) else {
                continue;
            };
            let by_kind = match kind {
                "allow_once" => ToolOutcome::ProceedOnce,
                "allow_always" => ToolOutcome::ProceedAlways,
                "reject_once" => ToolOutcome::Cancel,
                "reject_always" => {
                    reject_always.get_or_insert_with(|| id.to_owned());
                    continue;
                }
                _ => continue,
            };
            let outcome = match ToolOutcome::parse(id) {
                Some(named)
                    if named.confirms() == by_kind.confirms()
                        && named != ToolOutcome::ModifyWithEditor =>
                {
                    named
                }
                _ => by_kind,
            };
            if !chosen.iter().any(|(o, _)| *o == outcome) {
                chosen.push((outcome, id.to_owned()));
            }
        }
        if let Some(id) = reject_always {
            if !chosen.iter().any(|(o, _)| *o == ToolOutcome::Cancel) {
                chosen.push((ToolOutcome::Cancel, id));
            }
        }
        // askbus always offers "Allow once": an agent that did not offer it cannot be asked
        // through askbus without offering what it did not.
        if !chosen.iter().any(|(o, _)| *o == ToolOutcome::ProceedOnce) {
            return Err("the agent offers no allow_once option".into());
        }
        Ok(OptionMap { chosen, offered })
    }

    /// Every optionId the agent offered.
    pub fn offered(&self) -> &[String] {
        &self.offered
    }

    /// The outcomes askbus offers, in ToolOutcome's order.
    pub fn outcomes(&self) -> Vec<ToolOutcome> {
        let mut v: Vec<ToolOutcome> = self.chosen.iter().map(|(o, _)| *o).collect();
        if !v.contains(&ToolOutcome::Cancel) {
            v.push(ToolOutcome::Cancel);
        }
        v.sort_by_key(|o| ToolOutcome::ALL.iter().position(|a| a == o));
        v
    }

    /// The `session/request_permission` result for `outcome`. Denied with no reject option
    /// offered, it is the `cancelled` outcome (always a valid answer).
    pub fn result(&self, outcome: ToolOutcome) -> Value {
        match self.chosen.iter().find(|(o, _)| *o == outcome) {
            Some((_, id)) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
            None if outcome == ToolOutcome::Cancel => self.cancelled(),
            // The daemon only lets a UI pick an offered outcome; anything else is a denial.
            None => self.result(ToolOutcome::Cancel),
        }
    }

    /// The result when nobody decided: the reject option, else `cancelled`.
    pub fn denied(&self) -> Value {
        self.result(ToolOutcome::Cancel)
    }

    /// The result for a turn that was cancelled.
    pub fn cancelled(&self) -> Value {
        json!({"outcome": {"outcome": "cancelled"}})
    }
}

/// How askbus ended a permission request, for the relay. A dismissal is a person's "no": it is
/// never an approval.
pub fn decision(c: &Confirmation, options: &OptionMap) -> Decision {
    match &c.reason {
        ConfirmationReason::Daemon(Outcome::Answered) => {
            Decision::Decided(options.result(if c.confirmed {
                c.outcome
            } else {
                ToolOutcome::Cancel
            }))
        }
        ConfirmationReason::Daemon(Outcome::Dismissed) => Decision::Decided(options.denied()),
        ConfirmationReason::Daemon(Outcome::Timeout) => Decision::Ended,
        ConfirmationReason::Daemon(Outcome::Withdrawn) => Decision::Withdrawn,
        ConfirmationReason::Daemon(Outcome::NoUi) => {
            Decision::Unavailable("no askbus UI is connected".into())
        }
        ConfirmationReason::Daemon(Outcome::Shutdown) => {
            Decision::Unavailable("askbusd shut down".into())
        }
        ConfirmationReason::Refused(e) => {
            Decision::Unavailable(format!("askbusd refused it ({}: {})", e.code, e.message))
        }
        ConfirmationReason::DaemonLost(why) => Decision::Unavailable(why.clone()),
    }
}

/// The denial of a request askbus could not map: its `reject_once` option, else `cancelled`.
pub fn deny_unmapped(params: &Value) -> Value {
    let reject = params["options"].as_array().and_then(|opts| {
        opts.iter()
            .find(|o| o["kind"] == "reject_once")
            .and_then(|o| o["optionId"].as_str())
    });
    match reject {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

/// The approval for a `session/request_permission`'s params.
pub fn map(params: &Value) -> Result<Permission, String> {
    let call = params
        .get("toolCall")
        .and_then(Value::as_object)
        .ok_or("no toolCall object")?;
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .ok_or("no options array")?;
    let options = OptionMap::from_options(options)?;
    let kind = call
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or("other");
    let title = call
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let raw_input = call.get("rawInput").and_then(Value::as_object);
    let mut tool_call = json!({
        "name": kind,
        "args": raw_input.cloned().map(Value::Object).unwrap_or_else(|| json!({})),
    });
    if let Some(id) = call.get("toolCallId").and_then(Value::as_str) {
        tool_call["id"] = id.into();
    }
    let content: &[Value] = call
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // A permission request's toolCall is an update of the call the agent announced earlier
    // in a `session/update` (which the relay does not read): claude-code-acp sends no `kind`
    // here, only `rawInput`, where a shell call has its `command`.
    let unkinded_command = call.get("kind").is_none()
        && raw_input
            .and_then(|i| i.get("command"))
            .is_some_and(|c| c.is_string() || c.is_array());
    let details = edit_details(&title, content)
        .or_else(|| {
            (kind == "execute" || unkinded_command).then(|| exec_details(&title, raw_input))
        })
        .unwrap_or_else(|| info_details(kind, &title, content, call.get("locations")));
    let confirm = Confirm {
        tool_call,
        details: Some(details),
        outcomes: Some(options.outcomes()),
        ..Confirm::default()
    };
    let title = if title.trim().is_empty() {
        kind.to_owned()
    } else {
        title
    };
    Ok(Permission {
        confirm,
        title,
        options,
    })
}

/// `edit` details for the first `diff` content item: the file, its old and new text and the
/// unified diff between them.
fn edit_details(title: &str, content: &[Value]) -> Option<Value> {
    let diff = content
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("diff"))?;
    let path = diff.get("path").and_then(Value::as_str)?;
    let new = diff.get("newText").and_then(Value::as_str)?;
    let old = diff.get("oldText").and_then(Value::as_str);
    let file_name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_owned());
    let file_diff = similar::TextDiff::from_lines(old.unwrap_or_default(), new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{file_name}\tCurrent"),
            &format!("{file_name}\tProposed"),
        )
        .to_string();
    let title = if title.trim().is_empty() {
        format!("Edit: {path}")
    } else {
        title.to_owned()
    };
    Some(json!({
        "type": "edit",
        "title": title,
        "fileName": file_name,
        "filePath": path,
        "fileDiff": file_diff,
        "originalContent": old,
        "newContent": new,
        "isModifying": false,
    }))
}

/// `exec` details: the command from `rawInput.command` when the agent gives it, else the
/// title (ACP has no command field; Gemini CLI's title of an `execute` call is the command).
fn exec_details(title: &str, raw_input: Option<&Map<String, Value>>) -> Value {
    let command = raw_input
        .and_then(|i| i.get("command"))
        .and_then(|c| match c {
            Value::String(s) => Some(s.clone()),
            // An argv array (claude-code-acp, Codex): shown as one shell line.
            Value::Array(words) => {
                let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
                Some(argv_line(&words))
            }
            _ => None,
        })
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| title.to_owned());
    let roots = crate::hook::root_commands(&command);
    json!({
        "type": "exec",
        "title": "Confirm Shell Command",
        "command": command,
        "rootCommand": roots.join(", "),
        "rootCommands": roots,
    })
}

/// An argv as the shell line that runs it: a shell's `-c`/`-lc` script as the script itself
/// (Codex runs `["/bin/bash", "-lc", "touch created.txt"]`), else each word quoted as a shell
/// would need it, so the line a person reads is the command that runs.
fn argv_line(words: &[&str]) -> String {
    if let [shell, flag, script] = words {
        let name = Path::new(shell).file_name().and_then(|n| n.to_str());
        if matches!(name, Some("sh" | "bash" | "zsh" | "dash")) && matches!(*flag, "-c" | "-lc") {
            return (*script).to_owned();
        }
    }
    let quote = |w: &str| {
        let plain = !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
        if plain {
            w.to_owned()
        } else {
            format!("'{}'", w.replace('\'', r"'\''"))
        }
    };
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// `info` details for any other kind: the title, the text content and the locations.
fn info_details(kind: &str, title: &str, content: &[Value], locations: Option<&Value>) -> Value {
    let mut lines: Vec<String> = Vec::new();
    if !title.trim().is_empty() {
        lines.push(title.to_owned());
    }
    for c in content {
        if c.get("type").and_then(Value::as_str) == Some("content") {
            if let Some(text) = c.pointer("/content/text").and_then(Value::as_str) {
                lines.push(text.to_owned());
            }
        }
    }
    let paths: Vec<String> = locations
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|l| {
            let path = l.get("path").and_then(Value::as_str)?;
            Some(match l.get("line").and_then(Value::as_u64) {
                Some(line) => format!("{path}:{line}"),
                None => path.to_owned(),
            })
        })
        .collect();
    if !paths.is_empty() {
        lines.push(format!("Locations: {}", paths.join(", ")));
    }
    let title = format!("Allow this {kind} tool call?");
    json!({"type": "info", "title": title, "prompt": lines.join("\n")})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Gemini CLI 0.61.0 sends for a shell command (captured from `gemini --acp`).
    #[test]
    fn argv_is_shown_as_the_line_that_runs() {
        assert_eq!(
            argv_line(&["/bin/bash", "-lc", "touch created.txt"]),
            "touch created.txt"
        );
        assert_eq!(
            argv_line(&["rm", "-rf", "my dir", "it's"]),
            r"rm -rf 'my dir' 'it'\''s'"
        );
        assert_eq!(argv_line(&["ls", ""]), "ls ''");
    }

    fn gemini_shell() -> Value {
        json!({"sessionId": "e41ee75d", "toolCall": {
            "toolCallId": "run_shell_command__run_shell_command_1796461505331_0",
            "kind": "execute", "status": "pending", "title": "touch created.txt",
            "content": [{"content": {"text": "[current working directory /w] (Create a file)", "type": "text"}, "type": "content"}],
            "locations": []},
            "options": [
                {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
                {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}]})
    }

    #[test]
    fn a_gemini_shell_command_is_an_exec_approval() {
        let p = map(&gemini_shell()).unwrap();
        assert_eq!(
            p.confirm.tool_call,
            json!({"name": "execute", "args": {}, "id": "run_shell_command__run_shell_command_1796461505331_0"})
        );
        assert_eq!(
            p.confirm.details,
            Some(json!({"type": "exec", "title": "Confirm Shell Command",
                "command": "touch created.txt", "rootCommand": "touch", "rootCommands": ["touch"]}))
        );
        assert_eq!(
            p.confirm.outcomes,
            Some(vec![
                ToolOutcome::ProceedOnce,
                ToolOutcome::ProceedAlways,
                ToolOutcome::Cancel
            ])
        );
        assert_eq!(p.title, "touch created.txt");
        assert_eq!(
            p.options.result(ToolOutcome::ProceedAlways),
            json!({"outcome": {"outcome": "selected", "optionId": "proceed_always"}})
        );
        assert_eq!(
            p.options.denied(),
            json!({"outcome": {"outcome": "selected", "optionId": "cancel"}})
        );
    }

    #[test]
    fn a_diff_is_an_edit_approval() {
        let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "t", "kind": "edit",
            "title": "Writing to a.txt",
            "content": [{"type": "diff", "path": "/w/a.txt", "oldText": null, "newText": "hello\n"}]},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]});
        let p = map(&params).unwrap();
        let d = p.confirm.details.unwrap();
        assert_eq!(d["type"], "edit");
        assert_eq!(d["fileName"], "a.txt");
        assert_eq!(d["filePath"], "/w/a.txt");
        assert_eq!(d["originalContent"], Value::Null);
        assert_eq!(d["newContent"], "hello\n");
        assert!(d["fileDiff"].as_str().unwrap().contains("+hello"));
        assert_eq!(
            p.confirm.outcomes,
            Some(vec![ToolOutcome::ProceedOnce, ToolOutcome::Cancel]),
            "no allow_always offered, none asked"
        );
        assert_eq!(
            p.options.result(ToolOutcome::ProceedOnce),
            json!({"outcome": {"outcome": "selected", "optionId": "ok"}})
        );
    }

    #[test]
    fn options_map_by_kind_and_by_gemini_outcome_names() {
        let opts = |v: Value| OptionMap::from_options(v.as_array().unwrap());
        let m = opts(json!([
            {"optionId": "proceed_always_server", "name": "a", "kind": "allow_always"},
            {"optionId": "proceed_always_tool", "name": "b", "kind": "allow_always"},
            {"optionId": "proceed_once", "name": "c", "kind": "allow_once"},
            {"optionId": "never", "name": "d", "kind": "reject_always"},
        ]))
        .unwrap();
        assert_eq!(
            m.outcomes(),
            vec![
                ToolOutcome::ProceedOnce,
                ToolOutcome::ProceedAlwaysServer,
                ToolOutcome::ProceedAlwaysTool,
                ToolOutcome::Cancel
            ]
        );
        assert_eq!(m.denied()["outcome"]["optionId"], "never");
        // Two allow_always options with other names: the first is "Allow always", the second
        // stays the editor's.
        let m = opts(json!([
            {"optionId": "x", "name": "a", "kind": "allow_always"},
            {"optionId": "y", "name": "b", "kind": "allow_always"},
            {"optionId": "z", "name": "c", "kind": "allow_once"},
        ]))
        .unwrap();
        assert_eq!(
            m.result(ToolOutcome::ProceedAlways)["outcome"]["optionId"],
            "x"
        );
        // No reject option: a denial is the `cancelled` outcome.
        assert_eq!(m.denied(), json!({"outcome": {"outcome": "cancelled"}}));
        // No allow_once: askbus cannot ask it without offering "Allow once".
        assert!(opts(json!([{"optionId": "x", "name": "a", "kind": "allow_always"}])).is_err());
        // An outcome a UI could not have picked (not offered) is a denial, never an approval.
        assert_eq!(m.result(ToolOutcome::ModifyWithEditor), m.denied());
    }

    #[test]
    fn other_kinds_show_the_title_content_and_locations() {
        let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "t", "kind": "fetch",
            "title": "Fetch https://example.com",
            "content": [{"type": "content", "content": {"type": "text", "text": "Why: docs"}}],
            "locations": [{"path": "/w/a.rs", "line": 3}]},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]});
        let d = map(&params).unwrap().confirm.details.unwrap();
        assert_eq!(
            d,
            json!({"type": "info", "title": "Allow this fetch tool call?",
                "prompt": "Fetch https://example.com\nWhy: docs\nLocations: /w/a.rs:3"})
        );
    }

    #[test]
    fn a_call_without_kind_but_with_a_command_is_a_shell_command() {
        // claude-code-acp: the kind went with the earlier tool_call update.
        let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "toolu_1",
            "title": "`touch created.txt`",
            "rawInput": {"command": "touch created.txt", "description": "Create a file"}},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]});
        let p = map(&params).unwrap();
        let details = p.confirm.details.unwrap();
        assert_eq!(details["type"], "exec");
        assert_eq!(details["command"], "touch created.txt");
        let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "t", "kind": "other",
            "title": "x", "rawInput": {"command": "rm -rf /"}},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]});
        assert_eq!(
            map(&params).unwrap().confirm.details.unwrap()["type"],
            "info"
        );
    }

    #[test]
    fn a_command_in_raw_input_wins_over_the_title() {
        let params = json!({"sessionId": "s", "toolCall": {"toolCallId": "t", "kind": "execute",
            "title": "`ls`", "rawInput": {"command": ["git", "status"]}},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]});
        let d = map(&params).unwrap().confirm.details.unwrap();
        assert_eq!(d["command"], "git status");
        assert_eq!(d["rootCommands"], json!(["git"]));
    }
}
