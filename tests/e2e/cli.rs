//! The `askbus` command (ask, pending, answer, stats) against the real daemon: output and
//! exit statuses, as scripts rely on them.

use crate::harness as common;

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
    assert!(
        lines.next().unwrap().contains("every question needs"),
        "{err}"
    );

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

/// Bus text a prompt-injected agent (or a hostile UI) wrote, full of terminal escapes.
const EVIL: &str =
    "\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\u{9b}2J\u{202e}\u{2066}\u{200f}\x7f";

/// No byte that drives a terminal, and no bidi control, in `out` (which may hold newlines).
fn assert_inert(what: &str, out: &[u8]) {
    let s = text(out);
    for c in s.chars().filter(|c| *c != '\n') {
        assert!(
            !(c.is_control()
                || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{what} printed {c:?}: {s:?}"
        );
    }
}

/// `pending`, `pending --json`, `watch`, `watch --json`, `answer` and `ask` print bus data: none
/// of them lets an escape sequence or a bidi control through, and each shows it visibly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_text_never_drives_the_terminal() {
    let d = Daemon::start();
    let mut watch = d
        .cli()
        .arg("watch")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch_json = d
        .cli()
        .args(["watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for w in [&mut watch, &mut watch_json] {
        let mut err = std::io::BufReader::new(w.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(line.contains("watching"), "{line}");
    }
    let mut p = d.connect().await;
    p.send(json!({"type": "hello", "protocol": 1, "client": format!("agent{EVIL}")}))
        .await;
    p.recv_type("welcome").await;
    let id = format!("id{EVIL}");
    let label = format!("L{EVIL}");
    p.send(
        json!({"type": "ask-user-request", "correlationId": id, "questions": [
        {"question": format!("Q{EVIL}\nsecond line{EVIL}"), "header": format!("H{EVIL}"),
         "type": "choice", "options": [{"label": label, "description": format!("D{EVIL}")},
                                       {"label": "b", "description": ""}]}]}),
    )
    .await;
    let pending = tokio::task::block_in_place(|| wait_pending(&d, 1));
    assert_eq!(
        pending[0]["correlationId"],
        id.as_str(),
        "the JSON keeps the value"
    );

    let human = d.cli().arg("pending").output().unwrap();
    assert_inert("pending", &human.stdout);
    let listing = text(&human.stdout);
    for part in [
        "id␛]52;c;cHduZWQ=␇",
        "agent␛]52;c;cHduZWQ=␇␛]0;pwned␇",
        "Q␛]52;c;cHduZWQ=␇␛]0;pwned␇␛[2J\u{fffd}2J\u{fffd}\u{fffd}\u{fffd}␡",
        "\n      second line␛",
        "- L␛",
        ": D␛",
    ] {
        assert!(listing.contains(part), "{part:?} not in {listing}");
    }
    let json_out = d.cli().args(["pending", "--json"]).output().unwrap();
    assert_inert("pending --json", &json_out.stdout);

    for (w, what) in [(&mut watch, "watch"), (&mut watch_json, "watch --json")] {
        let mut out = std::io::BufReader::new(w.stdout.take().unwrap());
        let mut line = String::new();
        tokio::task::block_in_place(|| std::io::BufRead::read_line(&mut out, &mut line)).unwrap();
        assert!(line.contains("request"), "{what}: {line}");
        assert_inert(what, line.as_bytes());
        let _ = w.kill();
        let _ = w.wait();
    }

    let answer = d
        .cli()
        .args(["answer", &id, "--answer", &format!("0={label}")])
        .output()
        .unwrap();
    assert_eq!(code(&answer), 0, "{}", text(&answer.stderr));
    assert_inert("answer", &answer.stdout);
    let response = p.recv_type("ask-user-response").await;
    assert_eq!(
        response["answers"]["0"],
        label.as_str(),
        "answers carry the raw text"
    );

    // `ask` prints the UI's answer: a hostile UI's escapes stay inert too.
    let (mut ui, _) = d.ui().await;
    let ask = spawn_ask(&d, &[], QUESTIONS);
    let req = ui.recv_type("ask-user-request").await;
    let cid = req["correlationId"].as_str().unwrap();
    ui.send(json!({"type": "ask-user-response", "correlationId": cid,
        "answers": {"0": format!("A{EVIL}"), "1": "Yes"}}))
        .await;
    let out = tokio::task::block_in_place(|| ask.wait_with_output()).unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_inert("ask", &out.stdout);
    assert!(
        text(&out.stdout).contains("Database → A␛]52"),
        "{}",
        text(&out.stdout)
    );
}

/// `askbus ask` survives a daemon restart as the Python and Node producers do: the question it
/// asked before the daemon was SIGKILLed (or SIGTERMed, whose `shutdown` answer means "ask the
/// next daemon") reaches the new daemon under the same correlationId, and the answer given
/// there is the one it prints.
#[test]
fn ask_survives_a_daemon_restart() {
    for signal in [libc::SIGKILL, libc::SIGTERM] {
        let mut d = Daemon::start();
        let ask = spawn_ask(&d, &["-", "--json"], QUESTIONS);
        let before = wait_pending(&d, 1);
        let id = before[0]["correlationId"].as_str().unwrap().to_owned();
        if signal == libc::SIGKILL {
            d.kill();
        } else {
            d.terminate(Duration::from_secs(10));
        }
        d.restart();
        let after = wait_pending(&d, 1);
        assert_eq!(after[0]["correlationId"], id.as_str(), "signal {signal}");
        let ans = d
            .cli()
            .args(["answer", &id, "--answer", "0=SQLite", "--answer", "1=No"])
            .output()
            .unwrap();
        assert_eq!(code(&ans), 0, "{}", text(&ans.stderr));
        let out = ask.wait_with_output().unwrap();
        assert_eq!(code(&out), 0, "signal {signal}: {}", text(&out.stderr));
        let response: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(response["reason"], "answered", "{response}");
        assert_eq!(response["correlationId"], id.as_str());
        assert_eq!(response["answers"], json!({"0": "SQLite", "1": "No"}));
    }
}
