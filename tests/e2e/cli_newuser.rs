//! What a new user meets at the command line, against the real daemon: every failure of
//! `askbus ask` has its own exit status apart from the outcomes, connection errors say the
//! OS error once with a hint, `askbus answer` keeps every multiSelect pick, `stats` reads as
//! text, `ask` on a terminal says what it waits for, and the samples of the README and
//! docs/asking.md match the programs.

use crate::harness as common;
use crate::pty;

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::Daemon;
use serde_json::{json, Value};

const ONE: &str = r#"{"questions":[{"question":"Ship it?","header":"Ship","type":"yesno"}]}"#;

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn wait_pending(d: &Daemon, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = d.cli().args(["pending", "--json"]).output().unwrap();
        let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if list.len() == n {
            return list;
        }
        assert!(Instant::now() < deadline, "never saw {n} pending");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The table of statuses `askbus ask --help` prints.
fn help_statuses() -> String {
    let out = std::process::Command::new(common::cli_bin())
        .args(["ask", "--help"])
        .output()
        .unwrap();
    text(&out.stdout)
}

#[test]
fn every_ask_failure_has_its_own_documented_status() {
    let help = help_statuses();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/asking.md")).unwrap();
    for (status, words) in [
        (7, "lost"),
        (8, "protocol error"),
        (9, "cannot be read or is not JSON"),
        (64, "usage error"),
        (70, "internal error"),
    ] {
        assert!(
            help.contains(&format!("{status} ")),
            "help lacks {status}:\n{help}"
        );
        assert!(help.contains(words), "help lacks {words:?}:\n{help}");
        assert!(
            doc.contains(&format!("| {status} |")),
            "docs/asking.md's exit-status table lacks {status}"
        );
    }
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    // Usage error: not 2 (timeout).
    let usage = d.cli().args(["ask", "--no-such-flag"]).output().unwrap();
    assert_eq!(code(&usage), 64, "{}", text(&usage.stderr));
    let usage = d.cli().args(["ask", "--no-ui", "maybe"]).output().unwrap();
    assert_eq!(code(&usage), 64);
    // A missing file, and one that is not JSON: not 1 (dismissed).
    let missing = d
        .cli()
        .args(["ask", dir.path().join("none.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(code(&missing), 9);
    let err = text(&missing.stderr);
    assert!(
        err.contains("cannot read") && err.contains("none.json"),
        "{err}"
    );
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let not_json = common::spawn_with_stdin(d.cli().arg("ask"), "{\"questions\": [")
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&not_json), 9);
    assert!(text(&not_json.stderr).contains("not valid JSON"));
    // Invalid questions: the daemon's verdict (4), in the reference's words, then what is allowed.
    let invalid = common::spawn_with_stdin(
        d.cli().arg("ask"),
        r#"[{"question":"Q?","header":"H","type":"choise"}]"#,
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(code(&invalid), 4);
    assert_eq!(
        text(&invalid.stderr),
        "params/questions/0/type must be equal to one of the allowed values\n\
         askbus: question 0 (the first): \"type\" must be one of \"choice\", \"text\", \"yesno\".\n"
    );
    // Unreachable: 5, the OS error once, and what to do.
    let nowhere = d
        .cli()
        .args([
            "--socket",
            dir.path().join("no.sock").to_str().unwrap(),
            "ask",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        code(&nowhere),
        9,
        "stdin was empty: not JSON, checked before connecting"
    );
    let nowhere = common::spawn_with_stdin(
        d.cli().args([
            "--socket",
            dir.path().join("no.sock").to_str().unwrap(),
            "ask",
        ]),
        ONE,
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(code(&nowhere), 5);
    let err = text(&nowhere.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("Start askbusd"), "{err}");
}

#[test]
fn ask_exits_7_when_askbusd_dies_mid_question() {
    let mut d = Daemon::start();
    // The client resends to a restarted daemon until the question's deadline; none comes
    // back here, so a short deadline ends the wait.
    let ask = common::spawn_with_stdin(d.cli().args(["ask", "--timeout-ms", "3000"]), ONE);
    wait_pending(&d, 1);
    d.kill();
    let out = ask.wait_with_output().unwrap();
    assert_eq!(code(&out), 7, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("lost"), "{}", text(&out.stderr));
}

#[test]
fn ask_exits_8_on_a_frame_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    // A daemon that answers hello with a frame that is not JSON.
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut hello = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&[0, 0, 0, 3, b'x', b'y', b'z']).unwrap();
        let _ = s.read(&mut [0u8; 16]);
    });
    let out = common::spawn_with_stdin(
        std::process::Command::new(common::cli_bin()).args([
            "--socket",
            path.to_str().unwrap(),
            "ask",
        ]),
        ONE,
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(code(&out), 8, "{}", text(&out.stderr));
    fake.join().unwrap();
}

#[test]
fn every_command_says_the_os_error_once_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    for args in [
        vec!["pending"],
        vec!["stats"],
        vec!["answer", "x", "--dismiss"],
    ] {
        let out = std::process::Command::new(common::cli_bin())
            .arg("--socket")
            .arg(&sock)
            .args(&args)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(code(&out), 5, "{args:?}: {err}");
        assert_eq!(err.matches("(os error 2)").count(), 1, "{args:?}: {err}");
        assert!(err.contains("none.sock"), "{args:?}: {err}");
        assert!(err.contains("Start askbusd"), "{args:?}: {err}");
        assert!(err.contains("--socket"), "{args:?}: {err}");
    }
    // watch keeps retrying, but says the same once.
    let mut watch = std::process::Command::new(common::cli_bin())
        .arg("--socket")
        .arg(&sock)
        .arg("watch")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(watch.stderr.take().unwrap());
    let mut first = String::new();
    use std::io::BufRead;
    err.read_line(&mut first).unwrap();
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert_eq!(first.matches("(os error 2)").count(), 1, "{first}");
    assert!(
        first.contains("retrying until it is back. Is askbusd running?"),
        "{first}"
    );
}

#[test]
fn askbusd_says_its_name_once() {
    let dir = tempfile::tempdir().unwrap();
    // A socket path under a regular file cannot be bound.
    let file = dir.path().join("f");
    std::fs::write(&file, "").unwrap();
    let out = std::process::Command::new(common::daemon_bin())
        .arg("--socket")
        .arg(file.join("s.sock"))
        .arg("--no-telemetry")
        .arg("--no-store")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.starts_with("askbusd: cannot start"), "{err}");
    assert!(!err.contains("askbusd cannot start"), "{err}");
}

#[test]
fn answer_joins_multiselect_picks_and_refuses_them_elsewhere() {
    let d = Daemon::start();
    let q = json!({"questions": [
        {"question": "Which?", "header": "DBs", "type": "choice", "multiSelect": true,
         "options": [{"label": "SQLite", "description": ""}, {"label": "DuckDB", "description": ""}]},
        {"question": "Ship?", "header": "Ship", "type": "yesno"}]});
    let ask = common::spawn_with_stdin(d.cli().args(["ask", "--json"]), &q.to_string());
    let id = wait_pending(&d, 1)[0]["correlationId"]
        .as_str()
        .unwrap()
        .to_owned();
    let twice = d
        .cli()
        .args(["answer", &id, "--answer", "1=Yes", "--answer", "1=No"])
        .output()
        .unwrap();
    assert_eq!(code(&twice), 64);
    assert!(
        text(&twice.stderr).contains("question 1 (the second) takes one answer"),
        "{}",
        text(&twice.stderr)
    );
    let none = d.cli().args(["answer", &id]).output().unwrap();
    assert_eq!(code(&none), 64);
    assert!(
        text(&none.stderr).contains("--dismiss"),
        "{}",
        text(&none.stderr)
    );
    let help = d.cli().args(["answer", "--help"]).output().unwrap();
    assert!(text(&help.stdout).contains("'0=SQLite, DuckDB'"));
    let ok = d
        .cli()
        .args([
            "answer", &id, "--answer", "0=SQLite", "--answer", "1=Yes", "--answer", "0=DuckDB",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&ok), 0, "{}", text(&ok.stderr));
    let out = ask.wait_with_output().unwrap();
    let frame: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(frame["answers"], json!({"0": "SQLite, DuckDB", "1": "Yes"}));
}

#[test]
fn stats_is_text_unless_json() {
    let d = Daemon::start();
    let out = d.cli().arg("stats").output().unwrap();
    assert_eq!(code(&out), 0);
    let t = text(&out.stdout);
    assert!(t.starts_with("askbusd/"), "{t}");
    assert!(t.contains("pending questions: 0"), "{t}");
    assert!(serde_json::from_str::<Value>(&t).is_err(), "{t}");
    let j = d.cli().args(["stats", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["pending"], 0);
}

#[test]
fn socket_is_offered_only_where_it_does_something() {
    let bash = std::process::Command::new(common::cli_bin())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let script = text(&bash.stdout);
    let opts: Vec<&str> = script.lines().filter(|l| l.contains("opts=\"")).collect();
    assert!(opts
        .iter()
        .any(|l| l.contains("--timeout-ms") && l.contains("--socket")));
    for l in &opts {
        if l.contains("bash elvish fish") {
            assert!(!l.contains("--socket"), "completions offers --socket: {l}");
        }
    }
    for sub in ["man", "completions", "validate", "schema"] {
        let help = std::process::Command::new(common::cli_bin())
            .args([sub, "--help"])
            .output()
            .unwrap();
        assert!(
            !text(&help.stdout).contains("--socket"),
            "{sub} --help offers --socket"
        );
    }
    let man = std::process::Command::new(common::cli_bin())
        .args(["man", "--socket", "/x"])
        .output()
        .unwrap();
    assert_eq!(code(&man), 64);
    // Before or after the subcommand, where it matters.
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("after.sock");
    let after = std::process::Command::new(common::cli_bin())
        .args(["pending", "--socket", s.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(text(&after.stderr).contains("after.sock"));
}

#[test]
fn pending_says_time_left_like_the_ui() {
    let d = Daemon::start();
    let mut ask = common::spawn_with_stdin(d.cli().args(["ask", "--timeout-ms", "600000"]), ONE);
    wait_pending(&d, 1);
    let out = d.cli().arg("pending").output().unwrap();
    ask.kill().unwrap();
    ask.wait().unwrap();
    let t = text(&out.stdout);
    assert!(t.contains("m ") && t.contains("s left"), "{t}");
    assert!(!t.contains("599s") && !t.contains("600s"), "{t}");
}

#[test]
fn validate_says_what_is_allowed() {
    for (input, says) in [
        (
            r#"[{"question":"Q","header":"H","type":"choice","options":[{"label":"A","description":""}]}]"#,
            "question 0 (the first): a \"choice\" needs \"options\": 2 to 4",
        ),
        (
            r#"[{"question":"Q","header":"H","type":"yesno"},{"question":"Q","header":"H"}]"#,
            "question 1 (the second): every question needs",
        ),
        (r#"{"questions":[]}"#, "1 to 4 questions"),
    ] {
        let out = common::spawn_with_stdin(
            std::process::Command::new(common::cli_bin()).arg("validate"),
            input,
        )
        .wait_with_output()
        .unwrap();
        assert_eq!(code(&out), 1);
        assert!(
            text(&out.stderr).contains(says),
            "{input}: {}",
            text(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_on_a_terminal_says_what_it_waits_for() {
    let d = Daemon::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.json");
    std::fs::write(&file, ONE).unwrap();
    let sock = d.socket.to_str().unwrap();
    let args = [
        "--socket",
        sock,
        "ask",
        "--timeout-ms",
        "300000",
        file.to_str().unwrap(),
    ];
    let mut alone = pty::Pty::askbus(&args);
    let screen = alone.wait_for("no UI is connected").await;
    assert!(screen.contains("waiting up to 5m 00s"), "{screen}");
    assert!(
        screen.contains("askbus ui") && screen.contains("askbus web"),
        "{screen}"
    );
    alone.keys("\x03");
    alone.wait_exit().await;
    let (_ui, _) = d.ui().await;
    let with_ui = pty::Pty::askbus(&args);
    let screen = with_ui.wait_for("waiting up to").await;
    assert!(screen.contains("from the UI connected"), "{screen}");
    // Not on a terminal: silent until the outcome.
    let quiet = common::spawn_with_stdin(d.cli().args(["ask", "--timeout-ms", "50"]), ONE)
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&quiet), 2);
    assert!(
        !text(&quiet.stderr).contains("waiting"),
        "{}",
        text(&quiet.stderr)
    );
}

#[test]
fn the_readme_ready_line_is_what_askbusd_prints() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let sample = readme
        .lines()
        .skip_while(|l| !l.starts_with("$ cargo run --release --bin askbusd"))
        .nth(1)
        .expect("the README shows askbusd starting");
    let d = Daemon::start();
    let real = d
        .log_text()
        .lines()
        .find(|l| l.contains("askbusd ready on"))
        .expect("a ready line")
        .to_owned();
    let shape = |l: &str| -> Vec<String> {
        l.split_whitespace()
            .filter_map(|w| w.split_once('=').map(|(k, _)| k.to_owned()))
            .collect()
    };
    assert_eq!(
        shape(sample),
        shape(&real),
        "README: {sample}\nreal:   {real}"
    );
    assert!(sample.contains(" INFO askbusd ready on "), "{sample}");
}

#[test]
fn the_examples_validate_and_cover_every_kind_and_field() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/asking.md")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        files += 1;
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            doc.contains(&format!("(../examples/{name})")),
            "docs/asking.md does not list {name}"
        );
        let out = std::process::Command::new(common::cli_bin())
            .arg("validate")
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{name}: {}", text(&out.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for q in v["questions"].as_array().unwrap() {
            seen.insert(q["type"].as_str().unwrap().to_owned());
            for k in ["multiSelect", "placeholder"] {
                if q.get(k).is_some() {
                    seen.insert(k.to_owned());
                }
            }
            if q["options"].as_array().is_some_and(|o| {
                o.iter()
                    .any(|o| !o["description"].as_str().unwrap().is_empty())
            }) {
                seen.insert("description".into());
            }
        }
    }
    assert!(files >= 6);
    for want in [
        "choice",
        "text",
        "yesno",
        "multiSelect",
        "placeholder",
        "description",
    ] {
        assert!(seen.contains(want), "no example uses {want}");
    }
}

#[test]
fn web_says_when_askbusd_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let mut web = std::process::Command::new(common::cli_bin())
        .arg("--socket")
        .arg(dir.path().join("none.sock"))
        .args(["web", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(web.stderr.take().unwrap());
    let mut said = String::new();
    use std::io::BufRead;
    while !said.contains("Start askbusd") {
        if err.read_line(&mut said).unwrap() == 0 {
            break;
        }
    }
    web.kill().unwrap();
    web.wait().unwrap();
    assert!(
        said.contains("askbus web: cannot connect to askbusd"),
        "{said}"
    );
    assert!(
        said.contains("none.sock") && said.contains("Start askbusd"),
        "{said}"
    );
}
