//! A newcomer's first half hour (issue 31), against the real daemon over its real socket:
//! `askbus doctor` says what is wrong and the command that fixes it, every command exits
//! quietly when its reader goes away, and `askbus answer` refuses a typo of an option instead
//! of sending it as free text.

use crate::harness as common;

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Daemon;
use serde_json::{json, Value};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `askbus` with a fresh HOME and XDG directories under `home`, and a PATH without the
/// agents' CLIs (only the system's directories), as a new user's shell.
fn fresh(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("PATH", "/usr/bin:/bin")
        .env_remove("ASKBUS_DAEMON_UID");
}

fn doctor_json(out: &Output) -> Vec<Value> {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks:?}"))
}

#[test]
fn doctor_without_a_daemon_fails_with_the_command_that_starts_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(common::cli_bin());
    fresh(&mut cmd, dir.path());
    let out = cmd
        .env("ASKBUS_SOCKET", dir.path().join("askbus.sock"))
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let daemon_line = shown
        .lines()
        .position(|l| l.starts_with("FAIL daemon"))
        .unwrap_or_else(|| panic!("{shown}"));
    let fix = shown.lines().nth(daemon_line + 1).unwrap_or("");
    assert!(
        fix.contains("fix:") && fix.contains("askbusd"),
        "the failure names the command that fixes it: {shown}"
    );
    assert!(shown.contains("No such file or directory"), "{shown}");
}

#[test]
fn doctor_lists_this_nodes_uis_each_agents_hook_and_what_is_off() {
    let d = Daemon::start();
    let home = tempfile::tempdir().unwrap();
    let rt = common::rt();
    rt.block_on(async {
        let mut ui = d.connect().await;
        ui.send(json!({"type": "subscribe", "client": "test-tui/1", "via": "tui"}))
            .await;
        assert_eq!(ui.recv().await["type"], "subscribed");

        // Claude Code's hook installed the documented way; Gemini CLI's settings without it.
        let mut install = d.cli();
        fresh(&mut install, home.path());
        let out = install
            .args(["hook", "claude", "--install"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
        std::fs::write(home.path().join(".gemini/settings.json"), "{}").unwrap();

        let mut cmd = d.cli();
        fresh(&mut cmd, home.path());
        let out = tokio::task::block_in_place(|| cmd.args(["doctor", "--json"]).output()).unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
        let checks = doctor_json(&out);

        let daemon = check(&checks, "daemon");
        assert_eq!(daemon["status"], "ok", "{daemon}");
        assert!(
            daemon["detail"]
                .as_str()
                .unwrap()
                .contains("not as a service"),
            "{daemon}"
        );
        let uis = check(&checks, "uis");
        assert_eq!(uis["status"], "ok", "{uis}");
        let pid = std::process::id();
        assert!(
            uis["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("test-tui/1 (tui, pid {pid})")),
            "the subscribed UI by name, kind and pid: {uis}"
        );
        let socket = check(&checks, "socket");
        assert_eq!(socket["status"], "ok", "{socket}");
        assert!(socket["detail"].as_str().unwrap().contains("mode 0600"));

        let claude = check(&checks, "hook:claude");
        assert_eq!(claude["status"], "ok", "{claude}");
        assert!(claude["detail"].as_str().unwrap().contains("hook claude"));
        let gemini = check(&checks, "hook:gemini");
        assert_eq!(gemini["status"], "warn", "{gemini}");
        assert_eq!(gemini["fix"], "`askbus hook gemini --install`");
        assert_eq!(check(&checks, "hook:codex")["status"], "skip");

        let notifier = check(&checks, "notifier");
        assert_eq!(notifier["status"], "warn");
        assert!(notifier["fix"].as_str().unwrap().contains("--notify"));
        // The notifier subscribed: doctor names it.
        let mut notify = d.cli();
        fresh(&mut notify, home.path());
        let mut notify = notify
            .args(["notify", "--no-desktop", "--webhook", "http://127.0.0.1:9/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut cmd = d.cli();
            fresh(&mut cmd, home.path());
            let out =
                tokio::task::block_in_place(|| cmd.args(["doctor", "--json"]).output()).unwrap();
            if check(&doctor_json(&out), "notifier")["status"] == "ok" {
                break;
            }
            assert!(Instant::now() < deadline, "the notifier never showed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = notify.kill();
        let _ = notify.wait();
        assert_eq!(check(&checks, "policies")["status"], "ok");
        assert!(check(&checks, "policies")["detail"]
            .as_str()
            .unwrap()
            .starts_with("off"));
        assert!(check(&checks, "store")["detail"]
            .as_str()
            .unwrap()
            .starts_with("off"));
        assert_eq!(check(&checks, "federation")["status"], "skip");
        assert_eq!(check(&checks, "config")["status"], "ok");

        // The UI gone: doctor says nothing would answer, and what starts one.
        drop(ui);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut cmd = d.cli();
            fresh(&mut cmd, home.path());
            let out =
                tokio::task::block_in_place(|| cmd.args(["doctor", "--json"]).output()).unwrap();
            let checks = doctor_json(&out);
            let uis = check(&checks, "uis");
            if uis["status"] == "warn" {
                assert!(uis["fix"].as_str().unwrap().contains("askbus ui"), "{uis}");
                break;
            }
            assert!(Instant::now() < deadline, "{uis}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn doctor_reports_a_broken_config_file_with_where_to_fix_it() {
    let d = Daemon::start();
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join(".config/askbus");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("askbusd.toml"), "max_pending = \"many\"\n").unwrap();
    let mut cmd = d.cli();
    fresh(&mut cmd, home.path());
    let out = cmd.args(["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let config = check(&doctor_json(&out), "config").clone();
    assert_eq!(config["status"], "fail", "{config}");
    assert!(
        config["fix"]
            .as_str()
            .unwrap()
            .contains("askbusd --check-config"),
        "{config}"
    );
}

/// A reader that is already gone: the write end of a socket pair whose other end is closed.
fn gone_reader() -> Stdio {
    let (w, r) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(r);
    Stdio::from(OwnedFd::from(w))
}

#[test]
fn commands_whose_reader_went_away_exit_quietly() {
    let d = Daemon::start();
    let rt = common::rt();
    rt.block_on(async {
        let mut p = d.connect().await;
        p.send(common::choice_request("piped-1")).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while d
            .cli()
            .args(["pending", "--json"])
            .output()
            .unwrap()
            .stdout
            .len()
            < 10
        {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let home = tempfile::tempdir().unwrap();
        for args in [
            &["pending"][..],
            &["pending", "--json"],
            &["stats"],
            &["stats", "--json"],
            &["doctor"],
            &["schema", "request"],
            &["validate", "examples/database.json"],
            &["policy", "list"],
        ] {
            let mut cmd = d.cli();
            fresh(&mut cmd, home.path());
            let out = tokio::task::block_in_place(|| {
                cmd.args(args)
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .stdout(gone_reader())
                    .stderr(Stdio::piped())
                    .output()
            })
            .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "askbus {args:?} | true: {}",
                text(&out.stderr)
            );
            assert_eq!(text(&out.stderr), "", "askbus {args:?}: nothing on stderr");
        }
    });
}

#[test]
fn answer_refuses_a_typo_of_an_option_unless_other_says_free_text() {
    let d = Daemon::start();
    let rt = common::rt();
    rt.block_on(async {
        let mut p = d.connect().await;
        p.send(json!({
            "type": "ask-user-request",
            "correlationId": "typo-1",
            "questions": [
                {"question": "Which database?", "header": "Database", "type": "choice",
                 "options": [{"label": "SQLite", "description": ""},
                             {"label": "PostgreSQL", "description": ""}]},
                {"question": "Migrate?", "header": "Migrate", "type": "yesno"}
            ]
        }))
        .await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !text(&d.cli().args(["pending"]).output().unwrap().stdout).contains("typo-1") {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let run = |args: &[&str]| {
            let mut cmd = d.cli();
            tokio::task::block_in_place(|| cmd.args(args).output()).unwrap()
        };
        let typo = run(&[
            "answer", "typo-1", "--answer", "0=sqlite", "--answer", "1=Yes",
        ]);
        assert_eq!(typo.status.code(), Some(64), "{}", text(&typo.stdout));
        let said = text(&typo.stderr);
        assert!(
            said.contains("Did you mean `--answer 0=SQLite`?") && said.contains("--other"),
            "{said}"
        );
        let yes = run(&[
            "answer", "typo-1", "--answer", "0=SQLite", "--answer", "1=yep",
        ]);
        assert_eq!(yes.status.code(), Some(64), "a yes/no takes Yes or No");
        // Nothing was sent: the question is still pending, and free text goes with --other.
        p.expect_silence(Duration::from_millis(200)).await;
        let other = run(&[
            "answer", "typo-1", "--answer", "0=sqlite", "--answer", "1=Yes", "--other",
        ]);
        assert_eq!(other.status.code(), Some(0), "{}", text(&other.stderr));
        let response = p.recv_type("ask-user-response").await;
        assert_eq!(response["answers"], json!({"0": "sqlite", "1": "Yes"}));
    });
}

/// Issue 27 item 14: federating in the clear (no NATS authentication, a non-loopback server
/// without TLS) is a warning in `askbus doctor`, naming both holes and how to close them.
#[test]
fn doctor_warns_of_a_federation_in_the_clear() {
    let d = Daemon::start();
    let home = tempfile::tempdir().unwrap();
    let conf = home.path().join(".config/askbus");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("askbusd.toml"),
        "nats = \"nats://192.0.2.7:4222\"\nnode = \"devbox\"\n",
    )
    .unwrap();
    let mut cmd = d.cli();
    fresh(&mut cmd, home.path());
    let out = cmd.args(["doctor", "--json"]).output().unwrap();
    let config = check(&doctor_json(&out), "config").clone();
    assert_eq!(config["status"], "warn", "{config}");
    let detail = config.to_string();
    assert!(detail.contains("no NATS authentication"), "{detail}");
    assert!(detail.contains("192.0.2.7"), "{detail}");
    assert!(detail.contains("require_tls"), "{detail}");
}

/// `askbus doctor` lists `askbus web`: not running (and the command that starts one), then
/// running for this bus, at the address it really listens on and by pid.
#[test]
fn doctor_says_whether_askbus_web_serves_this_bus() {
    use std::io::BufRead;
    let d = Daemon::start();
    let home = tempfile::tempdir().unwrap();
    let doctor = || {
        let mut cmd = d.cli();
        fresh(&mut cmd, home.path());
        let out = cmd.args(["doctor", "--json"]).output().unwrap();
        check(&doctor_json(&out), "web").clone()
    };
    let before = doctor();
    assert_eq!(before["status"], "ok", "{before}");
    assert!(
        before["detail"].as_str().unwrap().contains("not running"),
        "{before}"
    );
    assert!(
        before["fix"]
            .as_str()
            .unwrap()
            .contains("askbus web --open"),
        "{before}"
    );

    let mut web = d.cli();
    fresh(&mut web, home.path());
    let mut web = web
        .args(["web", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kept open until it is stopped: it prints the sign-in link after this line.
    let mut out = std::io::BufReader::new(web.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    // "askbus web: serving the questions of askbusd at … on http://127.0.0.1:PORT/"
    let url = first
        .trim()
        .rsplit(' ')
        .next()
        .filter(|u| u.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let during = doctor();
    let _ = web.kill();
    let _ = web.wait();
    drop(out);
    assert_eq!(during["status"], "ok", "{during}");
    let detail = during["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "askbus web serves this bus at {url} (pid {})",
            web.id()
        )),
        "{during}"
    );
    assert!(detail.contains("0 browser tabs open"), "{during}");

    let after = doctor();
    assert!(
        after["detail"].as_str().unwrap().contains("not running"),
        "{after}"
    );
}

/// Federation configured but NATS out of reach: doctor fails the check and names the command
/// that lets a service reach it (the drop-in `askbus service install` writes).
#[test]
fn doctor_fails_an_unreachable_nats_with_the_command_that_opens_the_service() {
    let port = common::nats::free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let d = Daemon::builder()
        .args(&["--nats", &url, "--node", "lonely"])
        .start();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = d.cli();
    fresh(&mut cmd, home.path());
    let out = cmd.args(["doctor", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let federation = check(&doctor_json(&out), "federation").clone();
    assert_eq!(federation["status"], "fail", "{federation}");
    assert!(
        federation["detail"]
            .as_str()
            .unwrap()
            .contains("node lonely is not connected"),
        "{federation}"
    );
    assert!(
        federation["fix"]
            .as_str()
            .unwrap()
            .contains("`askbus service install --now`"),
        "{federation}"
    );
}
