//! The producer's approval mode and interactivity (`context.approvalMode`,
//! `context.interactive`) through the real daemon: rules with `modes` and `interactive`
//! decide only for the requests that say so; a non-interactive agent's unmatched call is
//! asked of a person (never denied by the reference's non-interactive default); bad values
//! are refused naming the field.

use crate::harness as common;

use std::path::Path;

use common::{Daemon, Raw};
use serde_json::{json, Value};

const RULES: &str = r#"
[[rule]]
toolName = "run_shell_command"
commandPrefix = "deploy"
decision = "allow"
priority = 100
modes = ["yolo", "autoEdit"]

[[rule]]
toolName = "run_shell_command"
commandPrefix = "rm"
decision = "deny"
priority = 100
modes = ["yolo"]
denyMessage = "Not even in yolo."

[[rule]]
toolName = "run_shell_command"
commandPrefix = "nightly"
decision = "allow"
priority = 100
interactive = false

[[rule]]
toolName = "run_shell_command"
commandPrefix = "curl"
decision = "deny"
priority = 100
interactive = false
denyMessage = "No downloads in batch runs."
"#;

fn approval(id: &str, command: &str, context: Option<Value>) -> Value {
    let mut f = json!({"type": "tool-confirmation-request", "correlationId": id,
           "toolCall": {"name": "run_shell_command", "args": {"command": command}},
           "outcomes": ["proceed_once", "cancel"], "timeoutMs": 60000, "noUi": "reject"});
    if let Some(c) = context {
        f["context"] = c;
    }
    f
}

/// Starts a daemon with RULES as the user tier and no shipped defaults (their rules would
/// decide some of the calls below first).
fn start(config_home: &Path, admin: &Path) -> Daemon {
    let dir = config_home.join("askbus/policies");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("modes.toml"), RULES).unwrap();
    let admin = admin.display().to_string();
    Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .env("XDG_CONFIG_HOME", config_home)
        .args(&["--policy-admin-dir", &admin, "--no-default-policies"])
        .start()
}

async fn producer(d: &Daemon) -> Raw {
    let mut p = d.connect().await;
    p.send(json!({"type": "hello", "protocol": 1, "client": "mode-test"}))
        .await;
    p.recv_type("welcome").await;
    p
}

/// How the approval ended: `allow` / `deny (message)` by rule, or `asked` (no UI is open and
/// the request said noUi reject, so a request put before people ends no-ui at once).
async fn outcome(p: &mut Raw, frame: Value) -> String {
    let id = frame["correlationId"].clone();
    p.send(frame).await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(r["correlationId"], id, "{r}");
    match (r["reason"].as_str(), r["confirmed"].as_bool()) {
        (Some("answered"), Some(true)) => "allow".into(),
        (Some("answered"), Some(false)) => format!("deny ({})", r["message"].as_str().unwrap()),
        (Some("no-ui"), Some(false)) => "asked".into(),
        _ => panic!("unexpected {r}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_and_interactivity_decide_only_for_the_requests_that_say_so() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let d = start(home.path(), admin.path());
    let mut p = producer(&d).await;
    let cases: Vec<(&str, Option<Value>, &str)> = vec![
        // modes = ["yolo", "autoEdit"]: only a producer that says one of them.
        ("deploy prod", None, "asked"),
        (
            "deploy prod",
            Some(json!({"approvalMode": "default"})),
            "asked",
        ),
        (
            "deploy prod",
            Some(json!({"approvalMode": "plan"})),
            "asked",
        ),
        (
            "deploy prod",
            Some(json!({"approvalMode": "autoEdit"})),
            "allow",
        ),
        (
            "deploy prod",
            Some(json!({"approvalMode": "yolo"})),
            "allow",
        ),
        (
            "deploy prod",
            Some(json!({"agent": "claude-code", "approvalMode": "yolo", "interactive": false})),
            "allow",
        ),
        // modes = ["yolo"] deny: only in yolo.
        ("rm -rf build", None, "asked"),
        (
            "rm -rf build",
            Some(json!({"approvalMode": "autoEdit"})),
            "asked",
        ),
        (
            "rm -rf build",
            Some(json!({"approvalMode": "yolo"})),
            "deny (Not even in yolo.)",
        ),
        // In yolo mode the reference allows what no rule decides (its YOLO default).
        (
            "make install",
            Some(json!({"approvalMode": "yolo"})),
            "allow",
        ),
        (
            "make install",
            Some(json!({"approvalMode": "autoEdit"})),
            "asked",
        ),
        // interactive = false: only a producer that says it is not interactive.
        ("nightly run", None, "asked"),
        ("nightly run", Some(json!({"interactive": true})), "asked"),
        ("nightly run", Some(json!({"interactive": false})), "allow"),
        ("curl example.com", None, "asked"),
        (
            "curl example.com",
            Some(json!({"interactive": false})),
            "deny (No downloads in batch runs.)",
        ),
        // The reference denies what no rule decides for a non-interactive agent; through
        // askbus a person is reachable, so it is asked.
        ("make install", Some(json!({"interactive": false})), "asked"),
        (
            "make install",
            Some(json!({"interactive": false, "approvalMode": "plan"})),
            "asked",
        ),
    ];
    for (i, (command, context, want)) in cases.into_iter().enumerate() {
        let got = outcome(&mut p, approval(&format!("c{i}"), command, context.clone())).await;
        assert_eq!(got, want, "{command} with {context:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_modes_and_interactivity_are_refused_naming_the_field() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let d = start(home.path(), admin.path());
    let mut p = producer(&d).await;
    for (i, (context, message)) in [
        (
            json!({"approvalMode": "YOLO"}),
            r#"context.approvalMode must be one of "default", "autoEdit", "yolo", "plan", not "YOLO""#,
        ),
        (
            json!({"approvalMode": "auto_edit"}),
            r#"context.approvalMode must be one of "default", "autoEdit", "yolo", "plan", not "auto_edit""#,
        ),
        (
            json!({"approvalMode": 3}),
            "context.approvalMode must be a string, not a number",
        ),
        (
            json!({"interactive": "false"}),
            "context.interactive must be true or false, not a string",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("bad{i}");
        p.send(approval(&id, "deploy prod", Some(context))).await;
        let e = p.recv_type("error").await;
        assert_eq!(
            (e["code"].as_str(), e["correlationId"].as_str()),
            (Some("invalid-request"), Some(id.as_str())),
            "{e}"
        );
        assert_eq!(e["message"], message, "{e}");
    }
    // The connection stays usable: a good one is decided after the refusals.
    let got = outcome(
        &mut p,
        approval("ok", "deploy prod", Some(json!({"approvalMode": "yolo"}))),
    )
    .await;
    assert_eq!(got, "allow");
}

/// The hooks say what the agent's input says: Claude Code's and Codex's `permission_mode`
/// (`acceptEdits` is `autoEdit`), and Claude Code's headless entrypoint (`claude -p` sets
/// `CLAUDE_CODE_ENTRYPOINT=sdk-cli` for its hooks); Gemini CLI's hook input says neither.
#[test]
fn the_hooks_pass_the_agents_mode_and_interactivity() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let d = start(home.path(), admin.path());
    let run =
        |agent: &str, event: &str, tool: &str, mode: &str, entry: Option<&str>, command: &str| {
            let stdin = json!({"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": "/tmp",
                           "permission_mode": mode, "hook_event_name": event,
                           "tool_name": tool, "tool_input": {"command": command}})
            .to_string();
            let mut cmd = d.cli();
            cmd.args(["hook", agent])
                .env_remove("CLAUDE_CODE_ENTRYPOINT");
            if let Some(e) = entry {
                cmd.env("CLAUDE_CODE_ENTRYPOINT", e);
            }
            let out = common::spawn_with_stdin(&mut cmd, &stdin)
                .wait_with_output()
                .unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            // Allowed by a rule, or (nothing decided, no UI open) handed back to the agent or,
            // where it has no prompt to hand back to, not approved.
            let allowed = stdout.contains("\"allow\"");
            assert!(out.status.code() == Some(0) || !allowed, "{stdout}");
            allowed
        };
    let claude = |mode: &str, entry: Option<&str>, command: &str| {
        run("claude", "PreToolUse", "Bash", mode, entry, command)
    };
    assert!(claude("acceptEdits", None, "deploy prod"));
    // Skipping Claude Code's own prompts leaves askbus the gate: not yolo.
    assert!(!claude("bypassPermissions", Some("cli"), "deploy prod"));
    assert!(!claude("default", None, "deploy prod"));
    assert!(!claude("plan", None, "deploy prod"));
    assert!(claude("default", Some("sdk-cli"), "nightly run"));
    assert!(claude("dontAsk", Some("cli"), "nightly run"));
    assert!(!claude("default", Some("cli"), "nightly run"));
    assert!(!claude("default", None, "nightly run"));
    let codex = |mode: &str| {
        run(
            "codex",
            "PermissionRequest",
            "Bash",
            mode,
            None,
            "deploy prod",
        )
    };
    assert!(codex("acceptEdits"));
    assert!(!codex("default"));
    // Gemini CLI's BeforeTool input carries no mode: `default`, whatever else it holds.
    assert!(!run(
        "gemini",
        "BeforeTool",
        "run_shell_command",
        "acceptEdits",
        None,
        "deploy prod"
    ));
}
