//! The store through the real daemon: pending questions and approvals survive SIGKILL and
//! SIGTERM with their ids and deadlines, producers re-attach by resending, answers given
//! while a producer was away are delivered when it comes back, the grace ends
//! `producer-gone`, deadlines that pass while the daemon is down end `timeout`; one daemon per
//! store, a corrupt or newer store stops the daemon and is left as it was, an earlier schema
//! is migrated, and an edit made with the sqlite3 CLI breaks the chain the daemon checks.

use crate::harness as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{choice_request, daemon_bin, request_with, Daemon};
use serde_json::{json, Value};

fn store_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state/askbus.db")
}

fn start(store: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--store", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    Daemon::start_with(&args)
}

fn approval(id: &str) -> Value {
    json!({"type": "tool-confirmation-request", "correlationId": id,
           "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build/"}}})
}

fn decision(id: &str, outcome: &str) -> Value {
    json!({"type": "tool-confirmation-response", "correlationId": id,
           "confirmed": outcome != "cancel", "outcome": outcome})
}

/// The ids a fresh UI is replayed, each once, with the time each has left.
async fn replayed(d: &Daemon, n: u64) -> (common::Raw, Vec<(String, u64)>) {
    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, n);
    let mut got = Vec::new();
    for _ in 0..n {
        let f = ui.recv().await;
        got.push((
            f["correlationId"].as_str().unwrap().to_owned(),
            f["timeoutMs"].as_u64().unwrap(),
        ));
    }
    ui.ping().await;
    (ui, got)
}

/// The next frame of type `ty`, past any other.
async fn until(raw: &mut common::Raw, ty: &str) -> Value {
    loop {
        let f = raw.recv().await;
        if f["type"] == ty {
            return f;
        }
    }
}

fn history(store: &Path, args: &[&str]) -> std::process::Output {
    Command::new(common::cli_bin())
        .arg("history")
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .expect("askbus history")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sql(store: &Path, q: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(store)
        .arg(q)
        .output()
        .expect("sqlite3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn restart_keeps_pending(kill: bool, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir);
    let mut d = start(&store, extra);
    let mut p = d.connect().await;
    p.send(request_with("q1", json!({"timeoutMs": 600_000})))
        .await;
    p.send(approval("a1")).await;
    p.ping().await;
    let (_ui, before) = replayed(&d, 2).await;
    if kill {
        d.kill();
    } else {
        let (status, _) = d.terminate(Duration::from_secs(10));
        assert!(status.success(), "SIGTERM exits 0 with a store");
    }
    // The producer is told nothing: no terminal frame, the connection just closes.
    assert_eq!(p.recv_within(Duration::from_secs(5)).await, None);
    d.restart();
    let (mut ui, after) = replayed(&d, 2).await;
    let ids = |v: &[(String, u64)]| v.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&before), "same ids, in order, each once");
    for ((_, was), (_, now)) in before.iter().zip(&after) {
        assert!(now <= was, "the deadline is kept, not reset: {now} > {was}");
        assert!(*now > 500_000, "the deadline stands: {now}");
    }
    // The producer re-attaches by resending (its timeoutMs is ignored), then gets its
    // answers as if nothing had happened.
    let mut p = d.connect().await;
    p.send(request_with("q1", json!({"timeoutMs": 5}))).await;
    p.send(approval("a1")).await;
    p.ping().await;
    ui.send(common::answer("q1", json!({"0": "SQLite"}))).await;
    assert_eq!(ui.recv_type("ask-user-ack").await["outcome"], "answered");
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(r["answers"]["0"], "SQLite");
    ui.send(decision("a1", "proceed_once")).await;
    ui.recv_type("tool-confirmation-ack").await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (r["confirmed"].as_bool(), r["outcome"].as_str()),
        (Some(true), Some("proceed_once"))
    );
    // A UI that subscribes now is replayed nothing: no request is shown twice.
    let (_ui2, none) = replayed(&d, 0).await;
    assert!(none.is_empty());
    d.terminate(Duration::from_secs(10));
    let rows = sql(&store, "SELECT correlation_id, reason, delivery, json_extract(decided_by, '$.kind') FROM requests ORDER BY seq");
    assert_eq!(
        rows,
        "q1|answered|delivered|human\na1|answered|delivered|human"
    );
}

#[test]
fn sigkill_keeps_pending_questions_and_approvals() {
    common::rt().block_on(restart_keeps_pending(true, &[]));
}

/// `--store-sync normal` drops the fsync per commit, not the commit: what a UI was shown and
/// what a producer was answered is in the WAL before they hear of it, so a crash of askbusd
/// loses nothing.
#[test]
fn sigkill_keeps_pending_under_store_sync_normal() {
    common::rt().block_on(restart_keeps_pending(true, &["--store-sync", "normal"]));
}

#[test]
fn sigterm_keeps_pending_questions_and_approvals_and_exits_0() {
    common::rt().block_on(restart_keeps_pending(false, &[]));
}

#[test]
fn an_answer_given_while_the_producer_is_away_is_delivered_when_it_comes_back() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let mut d = start(&store, &["--resume-grace", "60s"]);
        let mut p = d.connect().await;
        p.send(choice_request("g1")).await;
        p.ping().await;
        d.kill();
        d.restart();
        let (mut ui, _) = replayed(&d, 1).await;
        ui.send(common::answer("g1", json!({"0": "PostgreSQL"}))).await;
        ui.recv_type("ask-user-ack").await;
        // The id is reserved for its producer: another payload under it is a duplicate...
        let mut other = d.connect().await;
        other
            .send(json!({"type": "ask-user-request", "correlationId": "g1",
                         "questions": [{"question": "Something else?", "header": "Else", "type": "text"}]}))
            .await;
        other.recv_error("duplicate-correlation-id").await;
        // ...and the producer that resends it gets the very answer the UI was acked for.
        let mut p = d.connect().await;
        p.send(choice_request("g1")).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!((r["reason"].as_str(), r["answers"]["0"].as_str()), (Some("answered"), Some("PostgreSQL")));
        p.ping().await;
        // Delivered once: the id is free again.
        let mut again = d.connect().await;
        again.send(choice_request("g1")).await;
        again.send(json!({"type": "ping", "id": "sync"})).await;
        assert_eq!(again.recv().await["type"], "pong");
        let (_ui2, n) = replayed(&d, 1).await;
        assert_eq!(n[0].0, "g1");
    });
}

#[test]
fn the_grace_ends_producer_gone_and_a_dropped_connection_waits_for_it() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let d = start(&store, &["--resume-grace", "1500ms"]);
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(choice_request("drop")).await;
        ui.recv_type("ask-user-request").await;
        drop(p);
        // The UI is told nothing while the producer may come back...
        ui.expect_silence(Duration::from_millis(500)).await;
        // ...and the request ends producer-gone once the grace is over.
        let w = ui.recv_type("ask-user-withdrawn").await;
        assert_eq!(w["reason"], "producer-gone");
        let mut p = d.connect().await;
        p.send(choice_request("drop")).await;
        ui.recv_type("ask-user-request").await;
        let _ = p;
        let rows = sql(&store, "SELECT reason, delivery, json_extract(decided_by, '$.kind') FROM requests ORDER BY seq LIMIT 1");
        assert_eq!(rows, "producer-gone|undelivered|producer");
    });
}

#[test]
fn a_deadline_that_passes_while_the_daemon_is_down_ends_timeout_and_is_never_shown() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let mut d = start(&store, &[]);
        let mut p = d.connect().await;
        p.send(request_with("late", json!({"timeoutMs": 300})))
            .await;
        p.ping().await;
        d.kill();
        std::thread::sleep(Duration::from_millis(600));
        d.restart();
        let (_ui, none) = replayed(&d, 0).await;
        assert!(none.is_empty());
        let mut p = d.connect().await;
        p.send(request_with("late", json!({"timeoutMs": 300})))
            .await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(r["reason"], "timeout");
    });
}

fn refused(store: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(daemon_bin())
        .arg("--store")
        .arg(store)
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--no-telemetry")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn one_daemon_per_store_the_second_names_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir);
    let d = start(&store, &[]);
    let err = refused(&store);
    assert!(
        err.contains(&format!("in use by another askbusd (pid {})", d.pid())),
        "{err}"
    );
}

#[test]
fn a_corrupt_or_newer_store_stops_the_daemon_and_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("askbus.db");
    let junk = b"this is not a database, but someone's file".repeat(200);
    std::fs::write(&store, &junk).unwrap();
    let err = refused(&store);
    assert!(
        err.contains("is not a usable askbus database") && err.contains(store.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&store).unwrap(),
        junk,
        "never truncated or overwritten"
    );

    let newer = dir.path().join("newer.db");
    sql(&newer, "PRAGMA user_version = 99; CREATE TABLE kept(x);");
    let err = refused(&newer);
    assert!(err.contains("schema version 99, newer than"), "{err}");
    assert_eq!(sql(&newer, "PRAGMA user_version"), "99");
}

#[test]
fn a_store_of_every_earlier_schema_is_migrated_and_its_requests_restored() {
    use askbusd::store::schema::{V1, V2, V3, VERSION};
    let steps = [V1, V2, V3];
    assert_eq!(
        steps.len() as i64,
        VERSION - 1,
        "a new schema version: add its step here"
    );
    for version in 1..VERSION {
        common::rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = dir.path().join("askbus.db");
            // A store of this version with one pending question, as that schema wrote it.
            let deadline = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                + 600_000;
            let q = r#"[{"question":"Which database?","header":"Database","type":"choice","options":[{"label":"SQLite","description":"A file"},{"label":"PostgreSQL","description":"A server"}]}]"#;
            sql(
                &store,
                &format!(
                    "{} PRAGMA user_version = {version}; INSERT INTO requests (correlation_id, kind, uid, asked_at, deadline_at, timeout_ms, shown_sha256, body) VALUES ('old', 'question', {}, 1, {deadline}, 600000, 'x', '{q}');",
                    steps[..version as usize].concat(),
                    askbus::trust::effective_uid()
                ),
            );
            let d = start(&store, &[]);
            assert_eq!(sql(&store, "PRAGMA user_version"), VERSION.to_string(), "from {version}");
            let (_ui, got) = replayed(&d, 1).await;
            assert_eq!(got[0].0, "old", "from {version}");
        });
    }
}

#[test]
fn an_edit_with_the_sqlite3_cli_breaks_the_chain_and_the_daemon_names_the_record() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let mut d = start(&store, &[]);
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        for id in ["c1", "c2", "c3"] {
            p.send(approval(id)).await;
            ui.recv_type("tool-confirmation-request").await;
            ui.send(decision(id, if id == "c2" { "cancel" } else { "proceed_once" })).await;
            ui.recv_type("tool-confirmation-ack").await;
            p.recv_type("tool-confirmation-response").await;
        }
        d.terminate(Duration::from_secs(10));
        d.restart();
        assert!(!d.log_text().contains("does not verify"), "{}", d.log_text());
        // `askbus history verify` reads the file itself, the daemon running.
        let ok = history(&store, &["verify"]);
        assert!(ok.status.success() && stdout(&ok).contains("the chain verifies (3 records)"), "{}", stdout(&ok));
        let lines: Vec<Value> = stdout(&history(&store, &["--json"]))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ids: Vec<&str> = lines.iter().map(|r| r["correlationId"].as_str().unwrap()).collect();
        assert_eq!(ids, ["c3", "c2", "c1"], "newest first");
        let c2 = &lines[1];
        assert_eq!(c2["reason"], "answered");
        assert_eq!(c2["decision"]["outcome"], "cancel");
        assert_eq!(c2["decision"]["confirmed"], false);
        assert_eq!(c2["decidedBy"]["kind"], "human");
        assert_eq!(c2["toolCall"]["name"], "run_shell_command");
        assert_eq!(c2["delivered"], true);
        assert_eq!(c2["shownSha256"].as_str().unwrap().len(), 64);
        let one = history(&store, &["c2", "--json"]);
        assert_eq!(serde_json::from_str::<Value>(stdout(&one).trim()).unwrap(), *c2);
        let csv = stdout(&history(&store, &["--csv", "--reason", "answered", "--limit", "1"]));
        assert!(csv.starts_with("correlationId,kind,askedAt") && csv.lines().count() == 2, "{csv}");
        d.terminate(Duration::from_secs(10));
        // Someone turns the refusal of c2 into an approval.
        sql(&store, "UPDATE requests SET response = replace(response, '\"confirmed\":false', '\"confirmed\":true') WHERE correlation_id = 'c2'");
        let bad = history(&store, &["verify"]);
        assert!(!bad.status.success());
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(err.contains("record c2 (chain position 2) does not fit the chain"), "{err}");
        d.restart();
        let log = d.log_text();
        assert!(log.contains("record c2 (chain position 2) does not fit the chain"), "{log}");
    });
}

/// As root only (it mounts a size-limited tmpfs): a full disk refuses new requests
/// `store-unavailable`, still stores the decisions of those already accepted, and the daemon
/// accepts again by itself once there is room.
#[test]
fn a_full_disk_refuses_new_requests_decides_accepted_ones_and_recovers() {
    if askbus::trust::effective_uid() != 0 {
        eprintln!("skipped: needs root to mount a tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    if !mounted.success() {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let store = mnt.join("askbus.db");
    common::rt().block_on(async {
        let d = start(&store, &[]);
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(approval("before")).await;
        ui.recv_type("tool-confirmation-request").await;
        // Fill the disk, byte by byte at the end.
        let filler = mnt.join("filler");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).unwrap();
            let chunk = vec![7u8; 64 * 1024];
            let mut n = chunk.len();
            loop {
                match f.write(&chunk[..n]) {
                    Ok(_) => {}
                    Err(_) if n > 1 => n /= 2,
                    Err(_) => break,
                }
            }
        }
        // The next write fails; the reserve is given up so it goes through, and from then on
        // new requests are refused.
        let mut refused = false;
        for n in 0..50 {
            let id = format!("next-{n}");
            p.send(choice_request(&id)).await;
            p.send(json!({"type": "ping", "id": "x"})).await;
            let f = p.recv().await;
            if f["type"] == "error" && f["code"] == "store-unavailable" {
                refused = true;
                until(&mut p, "pong").await;
                break;
            }
            assert_eq!(f["type"], "pong", "{f}");
        }
        assert!(
            refused,
            "never refused store-unavailable:\n{}",
            d.log_text()
        );
        // What was accepted can still be decided, and the decision is acked.
        ui.send(decision("before", "proceed_once")).await;
        until(&mut ui, "tool-confirmation-ack").await;
        let r = until(&mut p, "tool-confirmation-response").await;
        assert_eq!(r["correlationId"], "before");
        // Room again: the daemon accepts new requests by itself.
        std::fs::remove_file(&filler).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            p.send(choice_request("after")).await;
            p.send(json!({"type": "ping", "id": "x"})).await;
            let f = p.recv().await;
            if f["type"] == "pong" {
                break;
            }
            assert_eq!(f["code"], "store-unavailable", "{f}");
            until(&mut p, "pong").await;
            assert!(std::time::Instant::now() < deadline, "never recovered");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        drop(p);
        drop(ui);
        drop(d);
    });
}

/// A producer that withdraws its request because a person answered it elsewhere (the editor
/// of `askbus acp`) says so on the cancel: its producer and UI are told `withdrawn` as for
/// any cancel, but the history records a human's decision `via` `acp` (the producer's uid and
/// name) and the telemetry line carries the same `decidedBy`; a plain cancel stays
/// `producer`; a bad `reason` or `via` is refused `invalid-request`, the request still pending.
#[test]
fn a_request_answered_elsewhere_is_recorded_as_a_human_decision_via_the_producers_claim() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let d = start(&store, &[]);
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(json!({"type": "hello", "protocol": 1, "client": "askbus-acp/test"}))
            .await;
        p.recv_type("welcome").await;
        for id in ["e1", "e2", "q1"] {
            if id == "q1" {
                p.send(choice_request(id)).await;
                ui.recv_type("ask-user-request").await;
            } else {
                p.send(approval(id)).await;
                ui.recv_type("tool-confirmation-request").await;
            }
        }
        for bad in [
            json!({"type": "tool-confirmation-cancel", "correlationId": "e1", "reason": "answered"}),
            json!({"type": "tool-confirmation-cancel", "correlationId": "e1", "via": "acp"}),
            json!({"type": "tool-confirmation-cancel", "correlationId": "e1",
                   "reason": "answered-elsewhere", "via": "Zed Editor"}),
            json!({"type": "ask-user-cancel", "correlationId": "q1", "reason": 7}),
        ] {
            p.send(bad.clone()).await;
            let err = p.recv_error("invalid-request").await;
            let msg = err["message"].as_str().unwrap();
            assert!(msg.contains("reason") || msg.contains("via"), "{bad}: {msg}");
        }
        p.send(json!({"type": "tool-confirmation-cancel", "correlationId": "e1",
                      "reason": "answered-elsewhere", "via": "acp"}))
            .await;
        let told = p.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (&told["reason"], &told["confirmed"], &told["outcome"]),
            (&json!("withdrawn"), &json!(false), &json!("cancel")),
            "{told}"
        );
        let gone = ui.recv_type("tool-confirmation-withdrawn").await;
        assert_eq!((&gone["correlationId"], &gone["reason"]), (&json!("e1"), &json!("withdrawn")));
        p.send(json!({"type": "tool-confirmation-cancel", "correlationId": "e2"}))
            .await;
        p.recv_type("tool-confirmation-response").await;
        p.send(json!({"type": "ask-user-cancel", "correlationId": "q1",
                      "reason": "answered-elsewhere"}))
            .await;
        assert_eq!(p.recv_type("ask-user-response").await["reason"], "withdrawn");

        let records = d.wait_telemetry(3);
        let line = |id: &str| records.iter().find(|r| r["correlationId"] == id).unwrap().clone();
        assert_eq!(line("e1")["decidedBy"], json!({"kind": "human", "via": "acp"}));
        assert_eq!(line("e1")["reason"], "withdrawn");
        assert!(line("e2").get("decidedBy").is_none(), "{}", line("e2"));
        assert_eq!(line("q1")["decidedBy"], json!({"kind": "human", "via": "client"}));
        let uid = askbus::trust::effective_uid();
        let lines: Vec<Value> = stdout(&history(&store, &["--json"]))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let rec = |id: &str| lines.iter().find(|r| r["correlationId"] == id).unwrap().clone();
        assert_eq!(
            rec("e1")["decidedBy"],
            json!({"kind": "human", "via": "acp", "uid": uid, "client": "askbus-acp/test"})
        );
        assert_eq!(rec("e1")["reason"], "withdrawn");
        assert_eq!(rec("e2")["decidedBy"]["kind"], "producer");
        assert_eq!(rec("q1")["decidedBy"]["via"], "client");
        let by_acp = stdout(&history(&store, &["--decided-by", "human", "--json"]));
        assert!(by_acp.contains("\"e1\"") && !by_acp.contains("\"e2\""), "{by_acp}");
    });
}

/// An answer owed to an away producer survives a second crash: after it, the producer that
/// resends gets that very answer, and no UI is shown the request again (it was decided once).
#[test]
fn an_owed_answer_survives_another_sigkill() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let mut d = start(&store, &[]);
        let mut p = d.connect().await;
        p.send(choice_request("owed")).await;
        p.ping().await;
        d.kill();
        d.restart();
        let (mut ui, _) = replayed(&d, 1).await;
        ui.send(common::answer("owed", json!({"0": "PostgreSQL"})))
            .await;
        ui.recv_type("ask-user-ack").await;
        d.kill();
        d.restart();
        let (_ui, none) = replayed(&d, 0).await;
        assert!(none.is_empty(), "decided once: not shown again");
        let mut p = d.connect().await;
        p.send(choice_request("owed")).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(
            (r["reason"].as_str(), r["answers"]["0"].as_str()),
            (Some("answered"), Some("PostgreSQL"))
        );
        p.ping().await;
    });
}

/// A response handed to a connected producer just before a crash may never have left the
/// daemon (it is committed, then queued): the record says delivered, yet after the restart
/// the producer resends. It gets that very answer again, and the request is not asked anew
/// (decided once, one record), with the whole text kept or redacted. A producer that does not
/// come back leaves the record delivered.
#[test]
fn a_response_cut_off_by_a_crash_is_given_to_the_resend_not_asked_again() {
    for text in ["keep", "redact"] {
        common::rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = store_in(&dir);
            let mut d = start(&store, &["--history-text", text, "--resume-grace", "1s"]);
            let (mut ui, _) = d.ui().await;
            let mut p = d.connect().await;
            for id in ["cut", "kept"] {
                p.send(choice_request(id)).await;
                ui.recv_type("ask-user-request").await;
                ui.send(common::answer(id, json!({"0": "PostgreSQL"})))
                    .await;
                ui.recv_type("ask-user-ack").await;
                // As far as the producer knows, this frame was lost with the daemon.
                p.recv_type("ask-user-response").await;
            }
            d.kill();
            d.restart();
            let (mut ui, none) = replayed(&d, 0).await;
            assert!(none.is_empty());
            let mut p = d.connect().await;
            p.send(choice_request("cut")).await;
            let r = p.recv_type("ask-user-response").await;
            assert_eq!(
                (r["reason"].as_str(), r["answers"]["0"].as_str()),
                (Some("answered"), Some("PostgreSQL")),
                "{text}: {r}"
            );
            p.ping().await;
            ui.ping().await;
            // "kept" never comes back: after the grace its id is free for another request
            // (reserved until then), its record delivered.
            let other = json!({"type": "ask-user-request", "correlationId": "kept",
                "questions": [{"question": "Something else?", "header": "Else", "type": "text"}]});
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let mut again = d.connect().await;
                again.send(other.clone()).await;
                again.send(json!({"type": "ping", "id": "x"})).await;
                let f = again.recv().await;
                if f["type"] == "pong" {
                    break;
                }
                assert_eq!(f["code"], "duplicate-correlation-id", "{f}");
                assert!(
                    std::time::Instant::now() < deadline,
                    "the id was never freed"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(
                ui.recv_type("ask-user-request").await["correlationId"],
                "kept"
            );
            let rows = sql(
                &store,
                "SELECT correlation_id, reason, delivery FROM requests ORDER BY seq",
            );
            assert_eq!(
                rows, "cut|answered|delivered\nkept|answered|delivered\nkept||pending",
                "{text}"
            );
        });
    }
}
