//! `askbus ui` deciding approvals (`tool-confirmation-request`) end to end: the real binary in
//! a pseudo-terminal, a real askbusd, and a raw producer that reads the exact
//! `tool-confirmation-response` the daemon forwards. Each kind of details is shown the way a
//! person decides fastest, at 80×24 and at 60×20.

use crate::harness as common;
use crate::pty;

use common::{Daemon, Raw};
use pty::*;
use serde_json::{json, Value};

/// A daemon and `askbus ui` (`rows`×`cols`) connected to it.
async fn setup_sized(rows: u16, cols: u16) -> (Daemon, Pty) {
    let daemon = Daemon::start();
    let ui = Pty::askbus_sized(
        &["ui", "--socket", daemon.socket.to_str().unwrap()],
        rows,
        cols,
    );
    ui.wait_for("● connected").await;
    (daemon, ui)
}

async fn producer(socket: &std::path::Path) -> Raw {
    let mut p = Raw::connect(socket).await;
    p.send(json!({"type": "hello", "protocol": 1, "client": "gemini-cli/0.61.0"}))
        .await;
    p.recv_type("welcome").await;
    p
}

fn exec_details() -> Value {
    json!({"type": "exec", "title": "Confirm Shell Command",
        "command": "rm -rf build && cargo build --release", "rootCommand": "rm, cargo",
        "rootCommands": ["rm", "cargo"]})
}

/// Sends a `tool-confirmation-request` for `tool` with `details` offering `outcomes`.
async fn request(p: &mut Raw, id: &str, tool: &str, details: Value, outcomes: &[&str]) {
    p.send(
        json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": tool, "args": {}},
        "details": details, "outcomes": outcomes,
        "context": {"project": "shop", "agent": "gemini", "cwd": "/home/me/shop",
                    "title": "fixing the build"}}),
    )
    .await;
}

/// What the producer is sent for a decision a UI made.
fn decided(id: &str, outcome: &str, message: Option<&str>) -> Value {
    let mut v = json!({"type": "tool-confirmation-response", "correlationId": id,
        "confirmed": outcome != "cancel", "outcome": outcome, "reason": "answered"});
    if let Some(m) = message {
        v["message"] = json!(m);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shows_the_command_with_its_roots_and_allows_once() {
    for (rows, cols) in [(24, 80), (20, 60)] {
        let (d, mut ui) = setup_sized(rows, cols).await;
        let mut p = producer(&d.socket).await;
        request(
            &mut p,
            "e1",
            "run_shell_command",
            exec_details(),
            &["proceed_once", "proceed_always", "cancel"],
        )
        .await;
        let screen = ui.wait_for("$ rm -rf build && cargo build").await;
        for part in [
            "gemini-cli/0.61.0 (pid ",
            "⚑ Approval",
            "Confirm Shell Command",
            "cwd: /home/me/shop",
            "shop · gemini · fixing the build",
            "● 1. Allow once",
            "  2. Allow always",
            "  3. Deny",
            "type a reason for the agent",
            "Esc to dismiss",
            "1 approval pending",
        ] {
            assert!(screen.contains(part), "{part:?} at {cols}×{rows}\n{screen}");
        }
        // The root commands stand out; their arguments do not.
        let (root_color, root_bold, root_underline) = ui.style_of("rm -rf").unwrap();
        assert_eq!(root_color, vt100::Color::Idx(3), "rm is highlighted");
        assert!(root_bold && root_underline);
        let (cargo_color, ..) = ui.style_of("cargo build").unwrap();
        assert_eq!(cargo_color, vt100::Color::Idx(3));
        let (arg_color, _, arg_underline) = ui.style_of("-rf build").unwrap();
        assert_ne!(arg_color, vt100::Color::Idx(3));
        assert!(!arg_underline);
        ui.keys(ENTER);
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            decided("e1", "proceed_once", None)
        );
        ui.wait_for("✓ Allow once · delivered to gemini-cli/0.61.0")
            .await;
        ui.wait_for("No questions pending.").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_only_where_offered() {
    let (d, mut ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    request(
        &mut p,
        "a1",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "proceed_always", "cancel"],
    )
    .await;
    ui.wait_for("2. Allow always").await;
    ui.keys("2");
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("a1", "proceed_always", None)
    );
    ui.wait_for("No questions pending.").await;
    // Without proceed_always in its outcomes, there is no such button.
    request(
        &mut p,
        "a2",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "cancel"],
    )
    .await;
    let screen = ui.wait_for("2. Deny").await;
    assert!(!screen.contains("2. Allow always"), "{screen}");
    // Its number is Deny now: "3" does nothing, ↓ then Enter denies.
    ui.keys("3");
    ui.keys(DOWN);
    ui.wait_for("● 2. Deny").await;
    ui.keys(ENTER);
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("a2", "cancel", None)
    );
    ui.wait_for("✗ Denied; gemini-cli/0.61.0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_with_a_typed_reason_for_the_agent() {
    let (d, mut ui) = setup_sized(20, 60).await;
    let mut p = producer(&d.socket).await;
    request(
        &mut p,
        "r1",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "cancel"],
    )
    .await;
    ui.wait_for("● 1. Allow once").await;
    // Typing anywhere starts the reason on the Deny row; digits and j/k are text there.
    ui.keys("not the build dir: run cargo clean 2 jk ");
    let screen = ui
        .wait_for("↳ not the build dir: run cargo clean 2 jk")
        .await;
    assert!(screen.contains("● 2. Deny"), "{screen}");
    assert!(screen.contains("Enter to deny"), "{screen}");
    ui.keys(ENTER);
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided(
            "r1",
            "cancel",
            Some("not the build dir: run cargo clean 2 jk")
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_dismisses_which_is_never_an_approval() {
    let (d, mut ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    request(
        &mut p,
        "x1",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "cancel"],
    )
    .await;
    ui.wait_for("● 1. Allow once").await;
    ui.keys(ESC);
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(r["confirmed"], false, "{r}");
    assert_eq!(r["reason"], "dismissed", "{r}");
    ui.wait_for("Dismissed without deciding").await;
}

/// A diff of `n` hunks' worth of changed lines: far taller than any screen.
fn long_edit() -> Value {
    let mut diff = String::from(
        "Index: main.rs\n===================================================================\n\
         --- main.rs\tCurrent\n+++ main.rs\tProposed\n@@ -1,60 +1,61 @@\n",
    );
    for i in 0..60 {
        diff.push_str(&format!(" keep line {i}\n-old line {i}\n+new line {i}\n"));
    }
    diff.push_str("+the very last added line\n");
    json!({"type": "edit", "title": "Confirm Edit", "fileName": "main.rs",
        "filePath": "/home/me/shop/src/main.rs", "fileDiff": diff,
        "originalContent": "old", "newContent": "new"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_diff_is_coloured_and_scrolls_while_the_buttons_stay() {
    for (rows, cols) in [(24, 80), (20, 60)] {
        let (d, mut ui) = setup_sized(rows, cols).await;
        let mut p = producer(&d.socket).await;
        request(
            &mut p,
            "d1",
            "replace",
            long_edit(),
            &["proceed_once", "proceed_always", "cancel"],
        )
        .await;
        let top = ui.wait_for("✎ main.rs").await;
        for part in [
            "+61 −60",
            "/home/me/shop/src/main.rs",
            "@@ -1,60 +1,61 @@",
            " keep line 0",
            "-old line 0",
            "+new line 0",
            "more lines below (PgDn/End)",
            "● 1. Allow once",
            "3. Deny",
            "PgUp/PgDn",
        ] {
            assert!(top.contains(part), "{part:?} at {cols}×{rows}\n{top}");
        }
        assert!(!top.contains("▲"), "{top}");
        assert_eq!(ui.style_of("+new line 0").unwrap().0, vt100::Color::Idx(2));
        assert_eq!(ui.style_of("-old line 0").unwrap().0, vt100::Color::Idx(1));
        assert_eq!(ui.style_of("@@ -1,60").unwrap().0, vt100::Color::Idx(6));
        // Page down: the start goes above, the buttons stay.
        ui.keys(PGDN);
        let page = ui.wait_for("more lines above (PgUp/Home)").await;
        assert!(!page.contains("-old line 0"), "{page}");
        assert!(page.contains("● 1. Allow once"), "{page}");
        // The end, then the whole way back.
        ui.keys(END);
        let end = ui.wait_for("+the very last added line").await;
        assert!(!end.contains("▼"), "{end}");
        assert!(end.contains("3. Deny"), "{end}");
        ui.keys(HOME);
        ui.wait_for("-old line 0").await;
        // Every line of the diff was on screen at some point.
        let mut seen = String::new();
        for _ in 0..80 {
            seen.push_str(&ui.screen());
            if ui.screen().contains("+the very last added line") {
                break;
            }
            let before = ui.screen();
            ui.keys(PGDN);
            ui.wait_until("the page to turn", |s| s != before).await;
        }
        for i in 0..60 {
            assert!(
                seen.contains(&format!("-old line {i}")),
                "line {i} never shown"
            );
        }
        // ↑/↓ still move between the buttons, and the choice is sent.
        ui.keys(DOWN);
        ui.wait_for("● 2. Allow always").await;
        ui.keys(ENTER);
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            decided("d1", "proceed_always", None)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_shows_server_tool_and_arguments() {
    for (rows, cols) in [(24, 80), (20, 60)] {
        let (d, mut ui) = setup_sized(rows, cols).await;
        let mut p = producer(&d.socket).await;
        p.send(
            json!({"type": "tool-confirmation-request", "correlationId": "m1",
            "toolCall": {"name": "create_issue", "args": {"repo": "me/shop"}},
            "serverName": "github", "toolAnnotations": {"destructiveHint": true},
            "details": {"type": "mcp", "title": "Confirm MCP Tool", "serverName": "github",
                "toolName": "create_issue", "toolDisplayName": "Create issue",
                "toolArgs": {"repo": "me/shop", "labels": ["bug"]}},
            "outcomes": ["proceed_once", "proceed_always_server", "proceed_always_tool",
                         "cancel"]}),
        )
        .await;
        let screen = ui.wait_for("Server: github").await;
        for part in [
            "Confirm MCP Tool",
            "Tool: Create issue (create_issue)",
            "destructive",
            "● 1. Allow once",
            "2. Allow every tool of this server",
            "3. Allow this tool always",
            "4. Deny",
        ] {
            assert!(screen.contains(part), "{part:?} at {cols}×{rows}\n{screen}");
        }
        // The arguments, pretty-printed, are there (below the fold at 60×20).
        ui.keys(END);
        let args = ui.wait_for("\"repo\": \"me/shop\"").await;
        assert!(args.contains("\"labels\": ["), "{args}");
        // An "always" that writes a rule: its number shows the rule first, again writes it.
        ui.keys("3");
        let shown = ui.wait_for("● 3. Allow this tool always").await;
        assert!(
            shown.contains("↳ writes the rule: allow create_issue of MCP server"),
            "{shown}"
        );
        ui.keys("3");
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            decided("m1", "proceed_always_tool", None)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_shows_the_prompt_and_urls() {
    for (rows, cols) in [(24, 80), (20, 60)] {
        let (d, mut ui) = setup_sized(rows, cols).await;
        let mut p = producer(&d.socket).await;
        request(
            &mut p,
            "i1",
            "web_fetch",
            json!({"type": "info", "title": "Confirm Web Fetch",
                "prompt": "Summarise the release notes of these pages",
                "urls": ["https://example.com/notes", "https://example.org/changelog"]}),
            &["proceed_once", "proceed_always", "cancel"],
        )
        .await;
        let screen = ui
            .wait_for("Summarise the release notes of these pages")
            .await;
        for part in [
            "Confirm Web Fetch",
            "• https://example.com/notes",
            "• https://example.org/changelog",
            "1. Allow once",
        ] {
            assert!(screen.contains(part), "{part:?} at {cols}×{rows}\n{screen}");
        }
        ui.keys("3");
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            decided("i1", "cancel", None)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_kinds_and_no_details_are_readable() {
    let (d, mut ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    let cases = [
        (
            json!({"type": "sandbox_expansion", "title": "Allow sandbox access",
                "command": "npm install", "rootCommand": "npm",
                "additionalPermissions": {"fileSystem": {"write": ["/home/me/.npm"]},
                                          "network": true}}),
            vec![
                "$ npm install",
                "Asks the sandbox for:",
                "write: /home/me/.npm",
                "network access",
            ],
        ),
        (
            json!({"type": "ask_user", "title": "Ask the user",
                "questions": [{"question": "Which database?", "header": "DB", "type": "choice",
                    "options": [{"label": "PostgreSQL", "description": ""},
                                {"label": "SQLite", "description": ""}]}]}),
            vec![
                "Asks you 1 question:",
                "1. [DB] Which database?",
                "– PostgreSQL",
                "– SQLite",
            ],
        ),
        (
            json!({"type": "exit_plan_mode", "title": "Ready to code?",
                "planPath": "/home/me/shop/plans/build.md"}),
            vec!["Ready to code?", "Plan: /home/me/shop/plans/build.md"],
        ),
        (
            Value::Null,
            vec![
                "Allow this tool call?",
                "Tool: delete_branch",
                "\"branch\": \"old\"",
            ],
        ),
    ];
    for (i, (details, parts)) in cases.into_iter().enumerate() {
        let id = format!("k{i}");
        let mut frame = json!({"type": "tool-confirmation-request", "correlationId": id,
            "toolCall": {"name": "delete_branch", "args": {"branch": "old"}}});
        if !details.is_null() {
            frame["details"] = details;
        }
        p.send(frame).await;
        let screen = ui.wait_for(parts[0]).await;
        for part in &parts {
            assert!(screen.contains(part), "{part:?}\n{screen}");
        }
        ui.keys("1");
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            decided(&id, "proceed_once", None)
        );
        ui.wait_for("No questions pending.").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_wait_in_the_list_grouped_by_project_and_marked() {
    let (d, mut ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    p.send(json!({"type": "ask-user-request", "correlationId": "q1",
        "questions": [{"question": "Ship it?", "header": "Ship", "type": "yesno"}],
        "context": {"project": "shop", "agent": "claude"}}))
        .await;
    ui.wait_for("Ship it?").await;
    // Arrivals wait in the list; an approval of another project groups apart.
    p.send(
        json!({"type": "tool-confirmation-request", "correlationId": "a1",
        "toolCall": {"name": "run_shell_command"}, "details": exec_details(),
        "context": {"project": "blog", "agent": "gemini"}}),
    )
    .await;
    request(
        &mut p,
        "a2",
        "replace",
        long_edit(),
        &["proceed_once", "cancel"],
    )
    .await;
    ui.wait_for("2 more waiting").await;
    ui.keys(CTRL_L);
    let list = ui.wait_for("▸ blog (1)").await;
    for part in [
        "▸ shop (2)",
        "[Ship] Ship it?",
        "⚑ Approval: edit main.rs",
        "⚑ Approval: $ rm -rf build && cargo build --release",
        "1 question · 2 approvals pending",
    ] {
        assert!(list.contains(part), "{part:?}\n{list}");
    }
    // shop's approval sits under shop (2nd), blog's comes last.
    let pos = |t: &str| list.find(t).unwrap();
    assert!(pos("▸ shop") < pos("edit main.rs") && pos("edit main.rs") < pos("▸ blog"));
    assert!(pos("▸ blog") < pos("$ rm -rf"));
    ui.keys("3");
    ui.wait_for("Confirm Shell Command").await;
    ui.keys("1");
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("a1", "proceed_once", None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawn_or_answered_elsewhere_closes_saying_why() {
    let (d, ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    request(
        &mut p,
        "w1",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "cancel"],
    )
    .await;
    ui.wait_for("● 1. Allow once").await;
    p.send(json!({"type": "tool-confirmation-cancel", "correlationId": "w1"}))
        .await;
    ui.wait_until("the notice", |s| {
        s.contains("Closed: approval from gemini-cli/0.61.0 (pid ")
            && s.contains(") — the agent withdrew it")
    })
    .await;
    p.recv_type("tool-confirmation-response").await;

    // Another UI decides first.
    let (mut other, _) = d.ui().await;
    request(
        &mut p,
        "w2",
        "run_shell_command",
        exec_details(),
        &["proceed_once", "cancel"],
    )
    .await;
    ui.wait_for("● 1. Allow once").await;
    other.recv_type("tool-confirmation-request").await;
    other
        .send(
            json!({"type": "tool-confirmation-response", "correlationId": "w2",
            "confirmed": false, "outcome": "cancel", "message": "no"}),
        )
        .await;
    ui.wait_for("answered in another UI").await;
    ui.wait_for("No questions pending.").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_in_approvals_never_reach_the_terminal() {
    let (d, mut ui) = setup_sized(24, 80).await;
    let mut p = producer(&d.socket).await;
    let evil = "\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2J\u{9b}2J\u{202e}";
    p.send(
        json!({"type": "tool-confirmation-request", "correlationId": "s1",
        "toolCall": {"name": format!("tool{evil}")},
        "details": {"type": "edit", "title": format!("T{evil}"), "fileName": format!("f{evil}"),
            "filePath": "/p", "fileDiff": format!("@@ -1 +1 @@\n-a{evil}\n+b{evil}\n"),
            "originalContent": "a", "newContent": "b"}}),
    )
    .await;
    let screen = ui.wait_for("+b␛]52;c;cHduZWQ=␇␛[2J").await;
    assert!(screen.contains("✎ f␛]52"), "{screen}");
    let raw = ui.raw();
    let text = String::from_utf8_lossy(&raw);
    assert!(
        !text.contains("\u{1b}]52"),
        "an OSC 52 reached the terminal"
    );
    assert!(!text.contains('\u{9b}') && !text.contains('\u{202e}'));
    ui.keys("1");
    p.recv_type("tool-confirmation-response").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_filter_never_shows_another_projects_approval() {
    let d = Daemon::start();
    let mut p = producer(&d.socket).await;
    let approval = |id: &str, project: &str, command: &str| {
        json!({"type": "tool-confirmation-request", "correlationId": id,
            "toolCall": {"name": "run_shell_command"},
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                        "rootCommand": "make", "rootCommands": ["make"]},
            "context": {"project": project}})
    };
    // One of each pending before the UI starts (the replay), then one of each live.
    p.send(approval("b1", "blog", "make publish-blog")).await;
    p.send(approval("s1", "shop", "make deploy-shop")).await;
    p.ping().await;
    let mut ui = Pty::askbus(&[
        "ui",
        "--socket",
        d.socket.to_str().unwrap(),
        "--project",
        "shop",
    ]);
    let screen = ui.wait_for("$ make deploy-shop").await;
    assert!(screen.contains("1 approval pending"), "{screen}");
    p.send(approval("b2", "blog", "make rebuild-blog")).await;
    p.send(approval("s2", "shop", "make migrate-shop")).await;
    ui.wait_for("1 more waiting").await;
    ui.keys(CTRL_L);
    let list = ui.wait_for("$ make migrate-shop").await;
    for s in [&screen, &list] {
        assert!(!s.contains("blog"), "{s}");
    }
    assert!(list.contains("2 approvals pending"), "{list}");
    ui.keys("1");
    ui.wait_for("$ make deploy-shop").await;
    ui.keys("1");
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(r["correlationId"], "s1");
    assert_eq!(r["confirmed"], true);
}

/// A daemon that decides by the policy rules of `config_home`'s user tier (and an empty
/// admin tier), and `askbus ui` (80×24) writing its "always" rules there.
async fn with_policies(config_home: &std::path::Path, admin: &std::path::Path) -> (Daemon, Pty) {
    let admin = admin.display().to_string();
    let d = Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .env("XDG_CONFIG_HOME", config_home)
        .args(&["--policy-admin-dir", &admin])
        .start();
    let ui = Pty::askbus_config(
        &["ui", "--socket", d.socket.to_str().unwrap()],
        24,
        80,
        config_home,
    );
    ui.wait_for("● connected").await;
    (d, ui)
}

/// A hook's approval (Allow once and Deny only) of the shell command `command` in `project`.
async fn hook_request(p: &mut Raw, id: &str, command: &str, project: &str) {
    p.send(
        json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": "Bash", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": command.split(' ').next().unwrap(),
                    "rootCommands": [command.split(' ').next().unwrap()]},
        "outcomes": ["proceed_once", "cancel"], "noUi": "wait", "timeoutMs": 60000,
        "context": {"project": project, "agent": "claude-code"}}),
    )
    .await;
}

/// "Allow always" in the TUI writes askbus's rule (the one `askbus answer --always` writes),
/// shown under the button before the tap, scoped to the request's project unless widened
/// with Ctrl+W; where the agent offers no "always" of its own (a hook), askbus's rule is the
/// "always" and the agent is sent Allow once. The next identical call is then allowed by the
/// daemon with no UI involved; a different one is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_writes_askbus_rule_shown_before_the_tap() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let (d, mut ui) = with_policies(home.path(), admin.path()).await;
    let file = home.path().join("askbus/policies/askbus-rules.toml");
    let mut p = producer(&d.socket).await;
    hook_request(&mut p, "h1", "npm run build", "shop").await;
    let screen = ui.wait_for("● 1. Allow once").await;
    // In short beside the button; whole, with its file, under it once the cursor is there.
    assert!(
        screen.contains("2. Allow always · rule: allow run_shell_command"),
        "{screen}"
    );
    ui.keys(DOWN);
    let screen = ui.wait_for("● 2. Allow always").await;
    let flat = |s: &str| {
        s.replace('│', " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    for part in [
        "↳ writes the rule: allow run_shell_command commands starting \"npm\" in project shop",
        "user tier, priority 4.95",
        "3. Deny",
        "^W every project",
    ] {
        assert!(flat(&screen).contains(part), "{part:?}\n{screen}");
    }
    assert!(!file.exists(), "nothing is written before the tap");
    // Widen, and narrow again: the rule shown follows.
    ui.keys("\x17");
    let wide = ui.wait_for("^W this project").await;
    assert!(
        flat(&wide).contains("starting \"npm\" in every project"),
        "{wide}"
    );
    ui.keys("\x17");
    let narrow = ui.wait_for("^W every project").await;
    assert!(
        flat(&narrow).contains("\"npm\" in project shop"),
        "{narrow}"
    );
    ui.keys(ENTER);
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("h1", "proceed_once", None)
    );
    let s = ui
        .wait_for("✓ Allow once · delivered to gemini-cli/0.61.0")
        .await;
    assert!(
        flat(&s).contains(
            "rule written: allow run_shell_command commands starting \"npm\" in project shop"
        ),
        "{s}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("commandPrefix = \"npm\""), "{written}");
    assert!(written.contains("askbusProject = \"shop\""), "{written}");
    assert!(written.contains("priority = 950"), "{written}");

    // The next npm call in shop: allowed by the daemon at once, never on the screen.
    hook_request(&mut p, "h2", "npm test", "shop").await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (&r["correlationId"], &r["outcome"], &r["reason"]),
        (&json!("h2"), &json!("proceed_once"), &json!("answered")),
        "{r}"
    );
    // A different command is asked of the person.
    hook_request(&mut p, "h3", "rm -rf out", "shop").await;
    let screen = ui.wait_for("$ rm -rf out").await;
    assert!(!screen.contains("npm test"), "{screen}");
    ui.keys(ESC);
    p.recv_type("tool-confirmation-response").await;

    // Widened with Ctrl+W: the rule then covers every project.
    hook_request(&mut p, "h4", "make deploy", "blog").await;
    ui.wait_for("$ make deploy").await;
    ui.keys(DOWN);
    let s = ui.wait_for("● 2. Allow always").await;
    assert!(flat(&s).contains("\"make\" in project blog"), "{s}");
    ui.keys("\x17");
    let s = ui.wait_for("^W this project").await;
    assert!(flat(&s).contains("\"make\" in every project"), "{s}");
    ui.keys(ENTER);
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("h4", "proceed_once", None)
    );
    ui.wait_for("rule written").await;
    hook_request(&mut p, "h5", "make test", "shop").await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (&r["correlationId"], &r["outcome"]),
        (&json!("h5"), &json!("proceed_once")),
        "{r}"
    );
}

/// Where the agent offers its own "Allow always" (Gemini CLI), the TUI sends it and writes
/// askbus's rule too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_own_always_also_writes_askbus_rule() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let (d, mut ui) = with_policies(home.path(), admin.path()).await;
    let mut p = producer(&d.socket).await;
    p.send(
        json!({"type": "tool-confirmation-request", "correlationId": "g1",
        "toolCall": {"name": "run_shell_command", "args": {"command": "cargo publish"}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": "cargo publish",
                    "rootCommand": "cargo", "rootCommands": ["cargo"]},
        "outcomes": ["proceed_once", "proceed_always", "cancel"], "noUi": "wait",
        "context": {"project": "shop", "agent": "gemini"}}),
    )
    .await;
    ui.wait_for("2. Allow always · rule: allow run_shell_command")
        .await;
    ui.keys("2");
    ui.wait_for("↳ writes the rule: allow run_shell_command commands")
        .await;
    ui.keys("2");
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        decided("g1", "proceed_always", None)
    );
    ui.wait_for("rule written").await;
    let written =
        std::fs::read_to_string(home.path().join("askbus/policies/askbus-rules.toml")).unwrap();
    assert!(written.contains("commandPrefix = \"cargo\""), "{written}");
}
