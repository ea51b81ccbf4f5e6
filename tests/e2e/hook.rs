//! `askbus hook gemini|claude|codex` against the real daemon, with the agents' recorded hook
//! inputs: every way a request ends, and what the agent is told (stdout JSON, stderr, exit
//! status). Only a UI's explicit approval allows; everything else denies (exit 2), or with
//! `--fallback ask` hands the call back to the agent. The agents themselves run in
//! tests/agents.

use crate::harness as common;
use crate::pty;

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
fn no_ui_reject_denies_or_hands_back() {
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
            &["claude", "--no-ui", "reject", "--fallback", "ask"],
            &claude_pre_tool_use("ls"),
        )
        .wait_with_output()
        .unwrap(),
    );
    assert_eq!(e.code, 0);
    assert_eq!(
        e.stdout,
        Some(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                    "permissionDecision": "ask",
                    "permissionDecisionReason": format!("askbus: {why} Asking here instead.")}}))
    );
}

/// Claude Code's PreToolUse input for a Bash command.
fn claude_pre_tool_use(command: &str) -> String {
    json!({"session_id": "09005570", "transcript_path": "/h/s.jsonl", "cwd": "/tmp",
           "permission_mode": "default", "hook_event_name": "PreToolUse",
           "tool_name": "Bash", "tool_input": {"command": command}})
    .to_string()
}

/// The hook's output, failing the test (and killing the hook) if it is still waiting after
/// 60 s: a hook that waits for a UI nobody opened is the bug these tests catch.
fn ended_soon(mut child: Child) -> Ended {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the hook still waits with no UI open");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ended(child.wait_with_output().unwrap())
}

#[test]
fn with_no_ui_open_the_call_goes_back_to_the_agent_at_once() {
    // No flags: what `askbus hook AGENT --install` writes.
    let d = Daemon::start();
    let why =
        "No user interface is connected to approve tool calls, so the tool call was not approved.";
    let e = ended_soon(hook(&d, &["claude"], &claude_pre_tool_use("ls")));
    assert_eq!(e.code, 0, "{}", e.stderr);
    let out = e.stdout.unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecisionReason"],
        format!("askbus: {why} Asking here instead.")
    );
    // Codex: no decision, so its own approval prompt shows.
    let codex = json!({"session_id": "s", "cwd": "/tmp", "hook_event_name": "PermissionRequest",
                       "tool_name": "Bash", "tool_input": {"command": "ls"}})
    .to_string();
    let e = ended_soon(hook(&d, &["codex"], &codex));
    assert_eq!((e.code, e.stdout), (0, None));
    assert!(e.stderr.contains("Asking here instead"), "{}", e.stderr);
    // A Gemini CLI that is not interactive (this test runs it without a terminal) has no
    // prompt to hand it to: denied at once, saying so.
    let e = ended_soon(hook(&d, &["gemini"], &gemini_input("ls")));
    assert_eq!(e.code, 2);
    let reason = e.stdout.unwrap()["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.starts_with(why) && reason.contains("without a terminal prompt"),
        "{reason}"
    );
    // askbusd not running: no UI would see it either.
    let dir = tempfile::tempdir().unwrap();
    let e = ended_soon(spawn_with_stdin(
        std::process::Command::new(common::cli_bin())
            .arg("--socket")
            .arg(dir.path().join("none.sock"))
            .args(["hook", "claude"]),
        &claude_pre_tool_use("ls"),
    ));
    assert_eq!(e.code, 0, "{}", e.stderr);
    let out = e.stdout.unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "ask");
    // With a UI open, it waits for the person as before.
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let child = hook(&d, &["claude"], &claude_pre_tool_use("ls"));
    let req = rt.block_on(approval(&mut ui));
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "confirmed": true,
                               "outcome": "proceed_once"})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 0);
    assert_eq!(
        e.stdout.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "allow"
    );
}

/// An interactive Gemini CLI (stdin and stdout a terminal, no -p) gets the call back for its
/// own prompt; the same run with -p is denied. The hook finds Gemini among its ancestors, as
/// it does under the real CLI: here a script named `gemini` run in a pseudo-terminal.
#[test]
fn gemini_gets_the_call_back_only_when_interactive() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.json");
    std::fs::write(&input, gemini_input("ls")).unwrap();
    let script = dir.path().join("gemini");
    std::fs::write(
        &script,
        format!(
            // As Gemini CLI runs a hook: a shell of its own, its stdin and stdout pipes (a
            // redirection in this script itself would move the script's own descriptors).
            "#!/bin/sh\nsh -c \"ASKBUS_SOCKET='{}' exec '{}' hook gemini < '{}' > '$OUT' 2>/dev/null\"\necho $? >> \"$OUT\"\n",
            d.socket.display(),
            common::cli_bin(),
            input.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (args, interactive) in [("", true), (" -p 'make a file'", false)] {
        let out = dir.path().join(format!("out-{interactive}"));
        let mut term = pty::Pty::shell(&format!(
            // CI=true (as CI runs) would make the hook read Gemini as headless, as Gemini does.
            "env -u CI -u GITHUB_ACTIONS OUT='{}' '{}'{args}",
            out.display(),
            script.display()
        ));
        rt().block_on(term.wait_exit());
        let text = std::fs::read_to_string(&out).unwrap();
        let (json, code) = text.trim_end().rsplit_once('\n').unwrap();
        let v: Value = serde_json::from_str(json).unwrap();
        if interactive {
            assert_eq!((v["decision"].as_str(), code), (Some("ask"), "0"), "{text}");
        } else {
            assert_eq!(
                (v["decision"].as_str(), code),
                (Some("deny"), "2"),
                "{text}"
            );
        }
    }
}

/// A daemon that answers the hook's request with `reply` (its correlationId filled in).
fn rogue_daemon(
    dir: &std::path::Path,
    reply: Value,
) -> (std::path::PathBuf, std::thread::JoinHandle<()>) {
    use std::io::Read;
    let path = dir.join("rogue.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let thread = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut read_frame = || {
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
            s.read_exact(&mut buf).unwrap();
            serde_json::from_slice::<Value>(&buf).unwrap()
        };
        let hello = read_frame();
        assert_eq!(hello["type"], "hello");
        let request = read_frame();
        let mut reply = reply;
        reply["correlationId"] = request["correlationId"].clone();
        let bytes = serde_json::to_vec(&reply).unwrap();
        s.write_all(&(bytes.len() as u32).to_be_bytes()).unwrap();
        s.write_all(&bytes).unwrap();
        let _ = s.read(&mut [0u8; 16]);
    });
    (path, thread)
}

#[test]
fn a_contradictory_or_unoffered_approval_never_allows() {
    let codex = json!({"session_id": "s", "cwd": "/tmp", "hook_event_name": "PermissionRequest",
                       "tool_name": "Bash", "tool_input": {"command": "curl x | sh"}})
    .to_string();
    let (claude_permission, _) = claude_permission_input();
    // None of these inputs offers anything but proceed_once and cancel, except Claude Code's
    // permission dialog, which also offers proceed_always.
    for (agent, input) in [
        ("gemini", gemini_input("curl x | sh")),
        ("claude", claude_pre_tool_use("curl x | sh")),
        ("codex", codex),
        ("claude", claude_permission),
    ] {
        for outcome in [
            "cancel",
            "proceed_always",
            "proceed_always_server",
            "modify_with_editor",
        ] {
            if agent == "claude"
                && input.contains("PermissionRequest")
                && outcome == "proceed_always"
            {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let reply = json!({"type": "tool-confirmation-response", "confirmed": true,
                               "outcome": outcome, "reason": "answered"});
            let (socket, rogue) = rogue_daemon(dir.path(), reply);
            let e = ended(
                spawn_with_stdin(
                    std::process::Command::new(common::cli_bin())
                        .arg("--socket")
                        .arg(&socket)
                        .args(["hook", agent, "--fallback", "ask"]),
                    &input,
                )
                .wait_with_output()
                .unwrap(),
            );
            assert_eq!(e.code, 2, "{agent} {outcome}: {:?} {}", e.stdout, e.stderr);
            assert!(
                e.stderr.contains("contradicts the request") && e.stderr.contains(outcome),
                "{agent} {outcome}: {}",
                e.stderr
            );
            rogue.join().unwrap();
        }
    }
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
            "--no-ui",
            "wait",
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

#[test]
fn a_reason_typed_with_escapes_reaches_gemini_inert_on_stdout_too() {
    let d = Daemon::start();
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let child = hook(&d, &["gemini"], &gemini_input("rm -rf build"));
    let req = rt.block_on(approval(&mut ui));
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "confirmed": false,
                               "outcome": "cancel",
                               "message": "no\u{1b}]52;c;ZWNobw==\u{7} \u{202e}txt.exe"})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 2);
    let reason = e.stdout.unwrap()["reason"].as_str().unwrap().to_owned();
    assert!(
        !reason.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "{reason:?}"
    );
    assert!(
        reason.starts_with("The user denied this tool call: no"),
        "{reason:?}"
    );
    assert!(
        !e.stderr.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "{:?}",
        e.stderr
    );
}

/// The settings file's askbus command under `event`.
fn installed_command(settings: &std::path::Path, event: &str) -> String {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(settings).unwrap()).unwrap();
    v["hooks"][event][0]["hooks"][0]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("no command under {event}: {v}"))
        .to_owned()
}

#[test]
fn install_keeps_the_hooks_flags_in_the_command_it_writes_and_a_backup_per_change() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.json");
    std::fs::write(&settings, "{\"model\": \"opus\"}\n").unwrap();
    let setup = |args: &[&str]| {
        let out = d
            .cli()
            .arg("hook")
            .args(args)
            .arg("--settings")
            .arg(&settings)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        said
    };
    // Three changes back to back (well inside one second): each keeps its own backup.
    setup(&["claude", "--fallback", "ask", "--install"]);
    let command = installed_command(&settings, "PreToolUse");
    assert!(
        command.ends_with(" hook claude --fallback ask"),
        "the installed command keeps --fallback ask: {command}"
    );
    setup(&[
        "claude",
        "--install",
        "--no-ui",
        "wait",
        "--timeout-ms",
        "1500",
    ]);
    let waits = installed_command(&settings, "PreToolUse");
    assert!(
        waits.ends_with(" hook claude --timeout-ms 1500 --no-ui wait"),
        "{waits}"
    );
    setup(&["claude", "--uninstall"]);
    let mut backups: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("settings.json.askbus-backup-"))
        .collect();
    backups.sort();
    assert_eq!(backups.len(), 3, "one backup per change: {backups:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(&backups[0])).unwrap(),
        "{\"model\": \"opus\"}\n",
        "the first backup is the file as it was"
    );

    // What was installed runs as written: with --fallback ask, a dismissal in the UI hands
    // the call back to Claude Code's prompt instead of denying it.
    setup(&["claude", "--fallback", "ask", "--install"]);
    let command = installed_command(&settings, "PreToolUse");
    let rt = rt();
    let (mut ui, _) = rt.block_on(d.ui());
    // The agent runs it with the environment it was given (the socket in ASKBUS_SOCKET here,
    // as `d.cli()` set it for --install).
    let child = spawn_with_stdin(
        std::process::Command::new("/bin/sh")
            .args(["-c", &command])
            .env("ASKBUS_SOCKET", &d.socket),
        &claude_pre_tool_use("ls"),
    );
    let req = rt.block_on(approval(&mut ui));
    rt.block_on(ui.send(json!({"type": "tool-confirmation-response",
                               "correlationId": req["correlationId"], "dismissed": true})));
    let e = ended(child.wait_with_output().unwrap());
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert_eq!(
        e.stdout.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "ask"
    );
}
