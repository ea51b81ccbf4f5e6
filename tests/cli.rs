//! The `askbus` command (ask, pending, answer, stats) against the real daemon: output and
//! exit statuses, as scripts rely on them.

mod common;

use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::Daemon;
use serde_json::{json, Value};

const QUESTIONS: &str = r#"{"questions":[
  {"question":"Which database?","header":"Database","type":"choice",
   "options":[{"label":"SQLite","description":"A file"},{"label":"PostgreSQL","description":"A server"}]},
  {"question":"Migrate now?","header":"Migrate","type":"yesno"}]}"#;

fn spawn_ask(d: &Daemon, args: &[&str], stdin: &str) -> Child {
    common::spawn_with_stdin(d.cli().arg("ask").args(args), stdin)
}

/// Waits until the daemon holds `n` pending requests (via `askbus pending --json`).
fn wait_pending(d: &Daemon, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = d.cli().args(["pending", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        if list.len() == n {
            return list;
        }
        assert!(Instant::now() < deadline, "never saw {n} pending");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn ask_pending_answer_walkthrough() {
    let d = Daemon::start();
    let ask = spawn_ask(&d, &["-"], QUESTIONS);
    let pending = wait_pending(&d, 1);
    let id = pending[0]["correlationId"].as_str().unwrap().to_owned();
    assert_eq!(
        pending[0]["producer"]["client"],
        format!("askbus-cli/{}", env!("CARGO_PKG_VERSION"))
    );
    let human = d.cli().arg("pending").output().unwrap();
    let listing = text(&human.stdout);
    assert!(
        listing.contains(&id) && listing.contains("Which database?"),
        "{listing}"
    );
    assert!(
        listing.contains("SQLite: A file") && listing.contains("- Yes"),
        "{listing}"
    );
    let ans = d
        .cli()
        .args([
            "answer",
            &id,
            "--answer",
            "0=PostgreSQL",
            "--answer",
            "1=Yes",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&ans), 0, "{}", text(&ans.stderr));
    assert_eq!(text(&ans.stdout).trim(), format!("{id}: answered"));
    let out = ask.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "**User answered:**\n  Database → PostgreSQL\n  Migrate → Yes\n"
    );
    // Answering again loses.
    let again = d
        .cli()
        .args(["answer", &id, "--answer", "0=SQLite"])
        .output()
        .unwrap();
    assert_ne!(code(&again), 0);
    assert!(text(&again.stderr).contains("not-pending"));
    let empty = d.cli().arg("pending").output().unwrap();
    assert_eq!(text(&empty.stdout).trim(), "No pending questions.");
}

#[test]
fn ask_json_and_exit_statuses() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.json");
    // A bare array is accepted as well as {"questions": [...]}.
    let bare: Value = serde_json::from_str::<Value>(QUESTIONS).unwrap()["questions"].clone();
    std::fs::write(&file, bare.to_string()).unwrap();
    let ask = d
        .cli()
        .args(["ask", file.to_str().unwrap(), "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_pending(&d, 1)[0]["correlationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let dismiss = d.cli().args(["answer", &id, "--dismiss"]).output().unwrap();
    assert_eq!(code(&dismiss), 0);
    let out = ask.wait_with_output().unwrap();
    assert_eq!(code(&out), 1, "dismissed");
    let frame: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(frame["type"], "ask-user-response");
    assert_eq!(frame["reason"], "dismissed");
    assert_eq!(frame["correlationId"], id.as_str());

    let timeout = spawn_ask(&d, &["--timeout-ms", "100"], QUESTIONS)
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&timeout), 2);
    assert!(text(&timeout.stderr).contains("within 0.1 seconds"));

    let no_ui = spawn_ask(&d, &["--no-ui", "reject"], QUESTIONS)
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&no_ui), 3);

    let invalid = spawn_ask(&d, &[], r#"{"questions":[{"question":"Q?","header":"H"}]}"#)
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&invalid), 4);
    // The reference's message as it is, then what is allowed.
    let err = text(&invalid.stderr);
    let mut lines = err.lines();
    assert_eq!(
        lines.next(),
        Some("params/questions/0 must have required property 'type'")
    );
    assert!(lines.next().unwrap().contains("every question needs"), "{err}");

    let nowhere = d
        .cli()
        .args(["ask", file.to_str().unwrap()])
        .env("ASKBUS_SOCKET", dir.path().join("nobody.sock"))
        .output()
        .unwrap();
    assert_eq!(code(&nowhere), 5);
    assert!(
        text(&nowhere.stderr).contains("nobody.sock"),
        "{}",
        text(&nowhere.stderr)
    );
    let flag = d
        .cli()
        .args(["--socket", "/nonexistent/x.sock", "stats"])
        .output()
        .unwrap();
    assert_eq!(code(&flag), 5);
    assert!(text(&flag.stderr).contains("/nonexistent/x.sock"));
}

#[test]
fn ctrl_c_withdraws_the_question() {
    let d = Daemon::start();
    let rt = common::rt();
    let (mut ui, _) = rt.block_on(d.ui());
    let ask = spawn_ask(&d, &[], QUESTIONS);
    rt.block_on(ui.recv_type("ask-user-request"));
    unsafe { libc::kill(ask.id() as i32, libc::SIGINT) };
    let w = rt.block_on(ui.recv_type("ask-user-withdrawn"));
    assert_eq!(w["reason"], "withdrawn");
    let out = ask.wait_with_output().unwrap();
    assert_eq!(code(&out), 6);
}

#[test]
fn stats_prints_counters() {
    let d = Daemon::start();
    let out = d.cli().args(["stats", "--json"]).output().unwrap();
    assert_eq!(code(&out), 0);
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["pending"], json!(0));
    assert!(stats["server"].as_str().unwrap().starts_with("askbusd/"));
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        vec!["--help"],
        vec!["ask", "--help"],
        vec!["pending", "--help"],
        vec!["answer", "--help"],
        vec!["stats", "--help"],
    ] {
        let out = std::process::Command::new(common::cli_bin())
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
    }
    let out = std::process::Command::new(common::daemon_bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = text(&out.stdout);
    for flag in [
        "--socket",
        "--telemetry",
        "--no-telemetry",
        "--default-timeout-ms",
        "--max-timeout-ms",
        "--no-ui",
        "--max-frame-bytes",
        "--max-pending-per-connection",
        "--max-connections",
        "--log-format",
    ] {
        assert!(help.contains(flag), "askbusd --help lacks {flag}");
    }
}
