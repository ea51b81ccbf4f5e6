//! The config file through the real binary: `--check-config`, errors that name the key and
//! the line, flags over the file, and SIGHUP changing limits live without dropping anyone.

use crate::harness as common;

use std::process::Command;
use std::time::Duration;

use common::{choice_request, request_with, rt, Daemon};
use serde_json::json;

fn check_config(text: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("askbusd.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(common::daemon_bin())
        .arg("--check-config")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).replace(&*path.to_string_lossy(), "FILE");
    let stderr = String::from_utf8_lossy(&out.stderr).replace(&*path.to_string_lossy(), "FILE");
    (out.status.success(), stdout, stderr)
}

#[test]
fn check_config_accepts_a_full_file_and_names_the_key_and_line_of_an_error() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/askbusd.toml"),
    )
    .unwrap();
    let (ok, stdout, stderr) = check_config(&example);
    assert!(ok, "the shipped example must be valid: {stderr}");
    assert_eq!(stdout, "FILE: OK\n");

    let (ok, _, stderr) = check_config("max_pending = 5\n\n[access]\nui_user = [0]\n");
    assert!(!ok);
    assert!(
        stderr.starts_with("askbusd: FILE:4:1: access.ui_user: unknown field `ui_user`"),
        "{stderr}"
    );
    let (ok, _, stderr) = check_config("# limits\nmax_pending_per_uid = 0\n");
    assert!(!ok);
    assert_eq!(
        stderr,
        "askbusd: FILE:2:23: max_pending_per_uid: must be at least 1, not 0\n"
    );
    let (ok, _, stderr) = check_config("socket = \"/x\"\nsocket = \"/y\"\n");
    assert!(!ok);
    assert!(stderr.contains("FILE:2:1: "), "{stderr}");
    assert!(stderr.contains("duplicate key"), "{stderr}");
}

#[test]
fn check_config_with_no_file_checks_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::daemon_bin())
        .args(["--check-config", "--max-pending", "4"])
        .env("XDG_CONFIG_HOME", dir.path())
        .env_remove("ASKBUS_CONFIG")
        .env_remove("CONFIGURATION_DIRECTORY")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no config file at "));
    let missing = dir.path().join("absent.toml");
    let out = Command::new(common::daemon_bin())
        .arg("--config")
        .arg(&missing)
        .arg("--check-config")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a named file must exist");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn a_bad_file_stops_the_daemon_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("askbusd.toml");
    std::fs::write(&path, "no_ui = \"sometimes\"\n").unwrap();
    let out = Command::new(common::daemon_bin())
        .arg("--config")
        .arg(&path)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--no-telemetry")
        .arg("--no-store")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":1:9: no_ui: unknown variant `sometimes`"),
        "{stderr}"
    );
    assert!(!dir.path().join("s.sock").exists());
}

#[test]
fn the_file_sets_limits_and_flags_win_over_it() {
    let d = Daemon::builder()
        .config("max_pending = 1\nno_ui = \"reject\"\ndefault_timeout_ms = 1234\n")
        .args(&["--max-pending", "2"])
        .start();
    rt().block_on(async {
        let mut p = d.connect().await;
        // no_ui = reject came from the file: with no UI, an answer at once.
        p.send(choice_request("no-ui")).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["reason"], "no-ui");
        let mut hello = d.connect().await;
        hello.send(json!({"type": "hello", "protocol": 1})).await;
        assert_eq!(hello.recv_type("welcome").await["defaultTimeoutMs"], 1234);
        // max_pending: the flag's 2, not the file's 1.
        for id in ["a", "b", "c"] {
            p.send(request_with(id, json!({"noUi": "wait"}))).await;
        }
        let e = p.recv_error("too-many-pending").await;
        assert_eq!(e["correlationId"], "c");
    });
}

#[test]
fn sighup_changes_the_max_pending_limit_live_and_a_bad_file_changes_nothing() {
    let d = Daemon::builder().config("max_pending = 2\n").start();
    rt().block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        for id in ["a", "b", "c"] {
            p.send(choice_request(id)).await;
        }
        p.recv_error("too-many-pending").await;
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "a");
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "b");

        d.write_config("max_pending = 3\n");
        d.reload();
        // Same connections, new limit: one more fits, the next does not.
        p.send(choice_request("c")).await;
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "c");
        p.send(choice_request("d")).await;
        let e = p.recv_error("too-many-pending").await;
        assert!(e["message"].as_str().unwrap().contains('3'), "{e}");

        d.write_config("max_pending = 10\nmax_pendnig = 1\n");
        d.reload();
        let log = d.log_text();
        assert!(
            log.contains("reload failed, keeping the running configuration")
                && log.contains(":2:1: max_pendnig: unknown field"),
            "{log}"
        );
        p.send(choice_request("d")).await;
        p.recv_error("too-many-pending").await;
        ui.ping().await;
        p.ping().await;
        ui.expect_silence(Duration::from_millis(50)).await;
    });
    assert!(d.log_text().contains("configuration reloaded"));
}

#[test]
fn keys_that_take_a_restart_are_reported_not_applied() {
    let d = Daemon::builder().config("").start();
    let other = d.dir.path().join("elsewhere.sock");
    d.write_config(&format!(
        "socket = {:?}\nlog_format = \"json\"\n",
        other.display().to_string()
    ));
    d.reload();
    // The flag --socket wins anyway; log_format changed and needs a restart.
    let log = d.log_text();
    assert!(log.contains("take a restart"), "{log}");
    assert!(log.contains("log_format"), "{log}");
    assert!(!other.exists());
    rt().block_on(async { d.connect().await.ping().await });
}

#[test]
fn sighup_changes_the_log_level() {
    let d = Daemon::builder()
        .env_remove("ASKBUS_LOG")
        .config("log_level = \"info\"\n")
        .start();
    rt().block_on(async { d.connect().await.ping().await });
    // "connected" is a debug line: not at info.
    assert!(!d.log_text().contains("connected"), "{}", d.log_text());
    d.write_config("log_level = \"debug\"\n");
    d.reload();
    rt().block_on(async { d.connect().await.ping().await });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !d.log_text().contains("connected") {
        assert!(std::time::Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(5));
    }
}
