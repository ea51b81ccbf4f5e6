//! `askbus hook gemini|claude|codex` against the real daemon, with the agents' recorded hook
//! inputs: every way a request ends, and what the agent is told (stdout JSON, stderr, exit
//! status). Only a UI's explicit approval allows; everything else denies (exit 2), or with
//! `--fallback ask` hands the call back to the agent. The agents themselves run in
//! tests/agents.

mod common;

use std::io::Write;
use std::process::{Child, Output, Stdio};

use common::{rt, spawn_with_stdin, Daemon, Raw};
use serde_json::{json, Value};

/// Gemini CLI 0.61.0's BeforeTool input, as recorded from the real CLI.
fn gemini_input(command: &str) -> String {
    json!({"session_id": "9c876a06-660c", "transcript_path": "/tmp/x/chats/s.json",
           "cwd": "/tmp", "hook_event_name": "BeforeTool",
           "timestamp": "2026-12-03T18:40:58.915Z", "tool_name": "run_shell_command",
           "tool_input": {"command": command, "description": "a command"}})
    .to_string()
}

/// Claude Code's PermissionRequest input (PreToolUse's fields, plus the dialog's suggestions).
fn claude_permission_input() -> (String, Value) {
    let rule = json!({"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "cargo build:*"}],
                      "behavior": "allow", "destination": "localSettings"});
    let input = json!({"session_id": "09005570", "transcript_path": "/h/s.jsonl", "cwd": "/tmp",
                       "permission_mode": "default", "hook_event_name": "PermissionRequest",
                       "tool_name": "Bash", "tool_input": {"command": "cargo build"},
                       "permission_suggestions": [rule]});
    (input.to_string(), rule)
}

fn hook(d: &Daemon, args: &[&str], input: &str) -> Child {
    spawn_with_stdin(d.cli().arg("hook").args(args), input)
}

struct Ended {
    code: i32,
    stdout: Option<Value>,
    stderr: String,
}

fn ended(out: Output) -> Ended {
    let stdout = String::from_utf8(out.stdout).unwrap();
    Ended {
        code: out.status.code().expect("exited"),
        stdout: (!stdout.trim().is_empty())
            .then(|| serde_json::from_str(&stdout).expect("stdout is one JSON value")),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The next approval the UI is sent (acks of its earlier answers are skipped).
async fn approval(ui: &mut Raw) -> Value {
    loop {
        let f = ui.recv().await;
        match f["type"].as_str() {
            Some("tool-confirmation-request") => return f,
            Some("tool-confirmation-ack") => continue,
            _ => panic!("expected a tool-confirmation-request, got {f}"),
        }
    }
}

#[test]
fn gemini_a_dismissed_prompt_denies_with_the_reason() {
    let d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let child = hook(&d, &["gemini"], &gemini_input("rm -rf build"));
    let req = rt.block_on(approval(&mut ui));
    assert_eq!(req["details"]["rootCommands"], json!(["rm"]));
    assert_eq!(req["context"]["agent"], "gemini-cli");
    assert_eq!(req["context"]["session"], "9c876a06-660c");
    assert_eq!(req["context"]["cwd"], "/tmp");
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "dismissed": true})));
    let e = ended(child.wait_with_output().unwrap());
    let why =
        "The user dismissed the confirmation without deciding, so the tool call was not approved.";
    assert_eq!(e.code, 2);
    assert_eq!(e.stdout, Some(json!({"decision": "deny", "reason": why})));
    assert_eq!(e.stderr.trim_end(), why);
}

#[test]
fn gemini_no_ui_denies_or_hands_back() {
    let d = Daemon::start();
    let e = ended(
        hook(&d, &["gemini", "--no-ui", "reject"], &gemini_input("ls"))
            .wait_with_output()
            .unwrap(),
    );
    let why =
        "No user interface is connected to approve tool calls, so the tool call was not approved.";
    assert_eq!(e.code, 2);
    assert_eq!(e.stdout.unwrap()["reason"], why);
    let e = ended(
        hook(
            &d,
            &["gemini", "--no-ui", "reject", "--fallback", "ask"],
            &gemini_input("ls"),
        )
        .wait_with_output()
        .unwrap(),
    );
    assert_eq!(e.code, 0);
    assert_eq!(
        e.stdout,
        Some(
            json!({"decision": "ask", "systemMessage": format!("askbus: {why} Asking here instead.")})
        )
    );
}

#[test]
fn a_malformed_input_is_denied_even_with_fallback_ask() {
    let d = Daemon::start();
    for (agent, input, says) in [
        ("gemini", "not json", "the hook input is not JSON"),
        ("gemini", "[]", "the hook input is not a JSON object"),
        (
            "claude",
            r#"{"hook_event_name":"PreToolUse"}"#,
            "the hook input has no tool_name",
        ),
        (
            "codex",
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash"}"#,
            "askbus hook codex handles PermissionRequest",
        ),
    ] {
        let e = ended(
            hook(&d, &[agent, "--fallback", "ask"], input)
                .wait_with_output()
                .unwrap(),
        );
        assert_eq!(e.code, 2, "{agent} {input}: {}", e.stderr);
        assert!(e.stderr.contains(says), "{agent} {input}: {}", e.stderr);
        assert!(
            e.stderr.contains("the tool call was not approved"),
            "{}",
            e.stderr
        );
    }
}

#[test]
fn askbusd_unreachable_denies_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody.sock");
    let out = spawn_with_stdin(
        std::process::Command::new(common::cli_bin()).args([
            "--socket",
            socket.to_str().unwrap(),
            "hook",
            "claude",
        ]),
        &json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/tmp",
                "tool_input": {"command": "ls"}})
        .to_string(),
    )
    .wait_with_output()
    .unwrap();
    let e = ended(out);
    assert_eq!(e.code, 2);
    assert_eq!(e.stdout, None, "Claude Code reads stderr on exit 2");
    assert!(
        e.stderr.starts_with(&format!(
            "askbus cannot reach askbusd at {}: ",
            socket.display()
        )) && e
            .stderr
            .trim_end()
            .ends_with(", so the tool call was not approved."),
        "{}",
        e.stderr
    );
}

#[test]
fn claude_permission_request_allow_always_returns_the_suggested_rules() {
    let d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let (input, rule) = claude_permission_input();
    let child = hook(&d, &["claude"], &input);
    let req = rt.block_on(approval(&mut ui));
    assert_eq!(
        req["outcomes"],
        json!(["proceed_once", "proceed_always", "cancel"])
    );
    assert_eq!(req["context"]["agent"], "claude-code");
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"],
                               "confirmed": true, "outcome": "proceed_always"})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert_eq!(
        e.stdout,
        Some(
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                    "decision": {"behavior": "allow", "updatedPermissions": [rule]}}})
        )
    );
}

#[test]
fn codex_permission_request_allow_and_deny() {
    let d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let input = json!({"session_id": "s", "turn_id": "t", "transcript_path": "/t.jsonl",
                       "cwd": "/tmp", "hook_event_name": "PermissionRequest", "model": "gpt-5",
                       "permission_mode": "default", "tool_name": "Bash",
                       "tool_input": {"command": "rm -f /tmp/example"}})
    .to_string();
    let child = hook(&d, &["codex"], &input);
    let req = rt.block_on(approval(&mut ui));
    assert_eq!(req["outcomes"], json!(["proceed_once", "cancel"]));
    assert_eq!(req["context"]["agent"], "codex");
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "confirmed": true})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!((e.code, e.stderr.as_str()), (0, ""));
    assert_eq!(
        e.stdout,
        Some(
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                    "decision": {"behavior": "allow"}}})
        )
    );
    // A reason typed with terminal escapes: the agent shows stderr, so it is made inert.
    let child = hook(&d, &["codex"], &input);
    let req = rt.block_on(approval(&mut ui));
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "confirmed": false,
                               "outcome": "cancel", "message": "no\u{1b}[2J thanks"})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 2);
    assert_eq!(e.stdout, None);
    assert_eq!(
        e.stderr,
        "The user denied this tool call: no\u{241b}[2J thanks\n"
    );
}

#[test]
fn askbusd_shutting_down_denies() {
    let mut d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let child = hook(&d, &["gemini"], &gemini_input("make"));
    rt.block_on(approval(&mut ui));
    d.terminate(std::time::Duration::from_secs(10));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 2);
    assert_eq!(
        e.stdout.unwrap()["reason"],
        "The askbus daemon shut down before anyone decided, so the tool call was not approved."
    );
}

#[test]
fn a_write_is_shown_as_a_diff() {
    let d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.rs"), "fn main() {}\n").unwrap();
    let input = json!({"session_id": "s", "cwd": dir.path(), "hook_event_name": "BeforeTool",
                       "tool_name": "write_file",
                       "tool_input": {"file_path": "main.rs",
                                      "content": "fn main() { println!(\"hi\"); }\n"}})
    .to_string();
    let child = hook(&d, &["gemini"], &input);
    let req = rt.block_on(approval(&mut ui));
    let details = &req["details"];
    assert_eq!(details["type"], "edit");
    assert_eq!(details["fileName"], "main.rs");
    assert_eq!(details["originalContent"], "fn main() {}\n");
    assert_eq!(
        details["fileDiff"],
        "--- main.rs\tCurrent\n+++ main.rs\tProposed\n@@ -1 +1 @@\n-fn main() {}\n+fn main() { println!(\"hi\"); }\n"
    );
    assert_eq!(req["context"]["title"], "Confirm Write: main.rs");
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "confirmed": true})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 0);
    assert_eq!(e.stdout, Some(json!({"decision": "allow"})));
}

#[test]
fn a_wrong_command_line_blocks_instead_of_exiting_with_usage() {
    // Gemini CLI runs the tool on any exit status but 0 with a decision or 2.
    let d = Daemon::start();
    for args in [
        &["gemini", "--timout-ms", "5"][..],
        &["gemini", "--fallback", "maybe"],
        &["cursor"],
    ] {
        // The hook exits before reading its input: a write that finds the pipe closed is fine.
        let mut child = d
            .cli()
            .arg("hook")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = gemini_input("ls");
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        let e = ended(child.wait_with_output().unwrap());
        assert_eq!(e.code, 2, "{args:?}: {}", e.stderr);
        assert!(
            e.stderr.contains("the tool call was not approved"),
            "{}",
            e.stderr
        );
    }
    // Other commands keep their usage status.
    let out = d.cli().args(["ask", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}
