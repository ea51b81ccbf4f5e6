//! The store's records over the socket, and what a decision records of its UI, through the
//! real daemon: the `history` frame answers newest first, pages with its cursor, filters, and
//! refuses bad queries (and says so without a store); `decidedBy` carries the `via` a UI
//! claimed in `hello` or `subscribe` (an unknown one, or `federation`, as `client`) and the
//! `user` an answer named; `--history-text redact` keeps only shapes in the record while a
//! producer re-attaching after a restart still gets the very answer; and, as root, a uid sees
//! only its own records through the frame and `askbus history`, an operator everyone's.

use crate::harness as common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{choice_request, request_with, Daemon, Raw};
use serde_json::{json, Value};

fn store_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state/askbus.db")
}

fn start(store: &Path, extra: &[&str]) -> Daemon {
    let mut args = vec!["--store", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    Daemon::start_with(&args)
}

/// The next frame of type `ty`, past any other.
async fn until(raw: &mut Raw, ty: &str) -> Value {
    loop {
        let f = raw.recv().await;
        if f["type"] == ty {
            return f;
        }
    }
}

/// A UI subscribed with `frame` (a `subscribe`, after an optional `hello`).
async fn ui(d: &Daemon, hello: Option<Value>, subscribe: Value) -> Raw {
    let mut ui = d.connect().await;
    if let Some(h) = hello {
        ui.send(h).await;
        ui.recv_type("welcome").await;
    }
    ui.send(subscribe).await;
    ui.recv_type("subscribed").await;
    ui
}

/// One `history` answer: the record ids in order, the records, the cursor.
async fn query(c: &mut Raw, q: Value) -> (Vec<String>, Vec<Value>, Value) {
    let mut frame = json!({"type": "history"});
    for (k, v) in q.as_object().unwrap() {
        frame[k] = v.clone();
    }
    c.send(frame).await;
    let a = until(c, "history").await;
    let records = a["records"].as_array().unwrap().clone();
    let ids = records
        .iter()
        .map(|r| r["correlationId"].as_str().unwrap().to_owned())
        .collect();
    (ids, records, a["cursor"].clone())
}

fn own_uid() -> u32 {
    askbusd::paths::effective_uid()
}

#[test]
fn the_history_frame_pages_filters_and_shows_who_decided_via_what() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let d = start(&store_in(&dir), &[]);
        let mut tui = ui(
            &d,
            None,
            json!({"type": "subscribe", "client": "t/1", "via": "tui"}),
        )
        .await;
        let mut chat = ui(
            &d,
            Some(json!({"type": "hello", "protocol": 1, "client": "chat/1", "via": "telegram"})),
            json!({"type": "subscribe"}),
        )
        .await;
        // A local UI cannot pass for a remote node's answer.
        let mut fake = ui(&d, None, json!({"type": "subscribe", "via": "federation"})).await;
        let mut odd = ui(&d, None, json!({"type": "subscribe", "via": "my-own-ui"})).await;
        let mut p = d.connect().await;
        let ctx = |project: &str| json!({"context": {"project": project}});
        p.send(request_with("h1", ctx("alpha"))).await;
        let mut approval = json!({"type": "tool-confirmation-request", "correlationId": "h2",
            "toolCall": {"name": "run_shell_command", "args": {"command": "rm -rf build/"}}});
        approval["context"] = json!({"project": "beta"});
        p.send(approval).await;
        p.send(request_with("h3", ctx("alpha"))).await;
        p.send(request_with("h4", ctx("beta"))).await;
        p.send(request_with("h5", ctx("beta"))).await;
        p.ping().await;
        tui.send(common::answer("h1", json!({"0": "SQLite"}))).await;
        until(&mut tui, "ask-user-ack").await;
        chat.send(
            json!({"type": "tool-confirmation-response", "correlationId": "h2",
                         "confirmed": false, "outcome": "cancel", "user": "Alice (42)"}),
        )
        .await;
        until(&mut chat, "tool-confirmation-ack").await;
        fake.send(
            json!({"type": "ask-user-response", "correlationId": "h3", "answers": {},
                         "cancelled": true}),
        )
        .await;
        until(&mut fake, "ask-user-ack").await;
        odd.send(common::answer("h4", json!({"0": "PostgreSQL"})))
            .await;
        until(&mut odd, "ask-user-ack").await;
        let mut ended = 0;
        while ended < 4 {
            let f = p.recv().await;
            ended += usize::from(
                f["type"] == "ask-user-response" || f["type"] == "tool-confirmation-response",
            );
        }

        let mut c = d.connect().await;
        let (ids, recs, cursor) = query(&mut c, json!({})).await;
        assert_eq!(ids, ["h5", "h4", "h3", "h2", "h1"], "newest first");
        assert_eq!(cursor, Value::Null);
        let by = |id: &str| {
            recs.iter()
                .find(|r| r["correlationId"] == id)
                .unwrap()
                .clone()
        };
        let uid = own_uid();
        assert_eq!(
            by("h1")["decidedBy"],
            json!({"kind": "human", "via": "tui", "uid": uid, "client": "t/1"})
        );
        assert_eq!(by("h1")["answers"], json!({"0": "SQLite"}));
        assert_eq!(
            by("h2")["decidedBy"],
            json!({"kind": "human", "via": "telegram", "uid": uid, "client": "chat/1",
                   "user": "Alice (42)"})
        );
        assert_eq!(by("h2")["decision"]["outcome"], "cancel");
        assert_eq!(by("h3")["reason"], "dismissed");
        assert_eq!(by("h3")["decidedBy"]["via"], "client");
        assert_eq!(by("h4")["decidedBy"]["via"], "client");
        assert_eq!(
            (by("h5")["reason"].clone(), by("h5")["endedAt"].clone()),
            (json!("pending"), Value::Null)
        );

        // Pages: the cursor continues where the last page ended, then there is none.
        let (ids, _, cursor) = query(&mut c, json!({"limit": 3})).await;
        assert_eq!(ids, ["h5", "h4", "h3"]);
        let (ids, _, last) = query(&mut c, json!({"limit": 3, "cursor": cursor})).await;
        assert_eq!(ids, ["h2", "h1"]);
        assert_eq!(last, Value::Null);

        for (filter, want) in [
            (json!({"project": "alpha"}), vec!["h3", "h1"]),
            (json!({"reason": "pending"}), vec!["h5"]),
            (json!({"kind": "approval"}), vec!["h2"]),
            (
                json!({"decidedBy": "human", "project": "beta"}),
                vec!["h4", "h2"],
            ),
            (json!({"correlationId": "h3"}), vec!["h3"]),
            (json!({"until": "2000-01-01T00:00:00Z"}), vec![]),
            (json!({"since": "2999-01-01T00:00:00Z"}), vec![]),
        ] {
            let (ids, _, _) = query(&mut c, json!({"filter": filter})).await;
            assert_eq!(ids, want, "{filter}");
        }

        // Bad queries are refused, naming what is wrong; the connection stays.
        for (bad, says) in [
            (json!({"type": "history", "limit": 0}), "limit"),
            (json!({"type": "history", "limit": 1001}), "limit"),
            (
                json!({"type": "history", "filter": {"day": "today"}}),
                "no key",
            ),
            (
                json!({"type": "history", "filter": {"since": "yesterday"}}),
                "RFC 3339",
            ),
            (
                json!({"type": "history", "filter": {"kind": "poll"}}),
                "kind",
            ),
            (json!({"type": "history", "cursor": "abc"}), "cursor"),
            (json!({"type": "history", "cursor": "12"}), "cursor"),
        ] {
            c.send(bad.clone()).await;
            let e = c.recv_error("invalid-frame").await;
            assert!(e["message"].as_str().unwrap().contains(says), "{bad}: {e}");
        }
        c.send(json!({"type": "hello", "protocol": 1, "via": "Not a word"}))
            .await;
        c.recv_error("invalid-frame").await;
        c.ping().await;

        // The CLI asks the daemon the same, with --daemon.
        let out = d
            .cli()
            .args(["history", "--daemon", "--json", "--project", "beta"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ids: Vec<&str> = lines
            .iter()
            .map(|r| r["correlationId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["h5", "h4", "h2"]);
    });
}

#[test]
fn without_a_store_history_is_store_unavailable() {
    common::rt().block_on(async {
        let d = Daemon::start();
        let mut c = d.connect().await;
        c.send(json!({"type": "history"})).await;
        let e = c.recv_error("store-unavailable").await;
        assert!(e["message"].as_str().unwrap().contains("--no-store"), "{e}");
        c.ping().await;
    });
}

#[test]
fn redact_keeps_shapes_yet_a_producer_back_after_a_restart_gets_the_very_answer() {
    common::rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir);
        let mut d = start(
            &store,
            &["--history-text", "redact", "--resume-grace", "60s"],
        );
        let mut p = d.connect().await;
        p.send(choice_request("r1")).await;
        p.ping().await;
        d.kill();
        d.restart();
        // Answered while its producer is away: owed, and the record is redacted at once.
        let mut ui = ui(&d, None, json!({"type": "subscribe"})).await;
        until(&mut ui, "ask-user-request").await;
        ui.send(common::answer("r1", json!({"0": "PostgreSQL"})))
            .await;
        until(&mut ui, "ask-user-ack").await;
        // The owed frame must come back from the store, not from memory.
        d.kill();
        d.restart();
        let mut p = d.connect().await;
        p.send(choice_request("r1")).await;
        let r = p.recv_type("ask-user-response").await;
        assert_eq!(
            (r["reason"].as_str(), r["answers"]["0"].as_str()),
            (Some("answered"), Some("PostgreSQL"))
        );
        let mut c = d.connect().await;
        let (_, recs, _) = query(&mut c, json!({"filter": {"correlationId": "r1"}})).await;
        let rec = &recs[0];
        assert_eq!(
            rec["questions"],
            json!([{"header": "Database", "type": "choice"}])
        );
        assert!(rec.get("answers").is_none_or(Value::is_null), "{rec}");
        d.terminate(Duration::from_secs(10));
        let out = std::process::Command::new(common::cli_bin())
            .args(["history", "verify", "--store"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

const ALICE: u32 = 61101;
const BOB: u32 = 61102;
const OPERATOR: u32 = 61103;

/// The CLI where every uid can run it (a hard link, else a copy, in a 0755 directory).
struct Reachable {
    dir: tempfile::TempDir,
    cli: PathBuf,
}

fn reachable() -> Reachable {
    let dir = tempfile::Builder::new()
        .prefix("askbus-hist-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cli = dir.path().join("askbus");
    if std::fs::hard_link(common::cli_bin(), &cli).is_err() {
        common::copy_executable(common::cli_bin(), &cli);
    }
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.path().join("q.json"),
        json!([{"question": "Ship it?", "header": "Ship", "type": "yesno"}]).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(
        dir.path().join("q.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    Reachable { dir, cli }
}

#[test]
fn a_uid_reads_only_its_own_records_an_operator_everyones() {
    if own_uid() != 0 {
        eprintln!("skipped: needs root to run clients as other uids");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let store = store_in(&state);
    let d = Daemon::builder()
        .args(&["--store", store.to_str().unwrap()])
        .config(&format!(
            "[access]\nproducer_users = [{ALICE}, {BOB}]\nui_users = [{ALICE}, {BOB}]\n\
             operator_users = [{OPERATOR}]\n"
        ))
        .start();
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = reachable();
    let as_uid = |uid: u32, args: &[&str]| {
        let out = std::process::Command::new(&r.cli)
            .args(args)
            .env("ASKBUS_SOCKET", &d.socket)
            // The default store path is the daemon's file, which is not theirs to read.
            .env("XDG_STATE_HOME", state.path())
            .env("STATE_DIRECTORY", state.path().join("state"))
            .uid(uid)
            .gid(uid)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let q = r.dir.path().join("q.json");
    let q = q.to_str().unwrap();
    // Each asks once; with no UI it ends at once (no-ui), on record.
    for uid in [ALICE, BOB] {
        let (code, _, err) = as_uid(
            uid,
            &["ask", q, "--no-ui", "reject", "--timeout-ms", "60000"],
        );
        assert_ne!(code, Some(0), "no UI answered: {err}");
    }
    let uids = |out: &str| -> Vec<u64> {
        let mut v: Vec<u64> = out
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["producer"]["uid"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        v.sort();
        v
    };
    for (uid, args, want) in [
        (
            ALICE,
            vec!["history", "--daemon", "--json"],
            vec![u64::from(ALICE)],
        ),
        (
            BOB,
            vec!["history", "--daemon", "--json"],
            vec![u64::from(BOB)],
        ),
        // Without --daemon too: the file is root's, so the daemon answers.
        (ALICE, vec!["history", "--json"], vec![u64::from(ALICE)]),
        (
            OPERATOR,
            vec!["history", "--daemon", "--json"],
            vec![u64::from(ALICE), u64::from(BOB)],
        ),
    ] {
        let (code, out, err) = as_uid(uid, &args);
        assert_eq!(code, Some(0), "uid {uid}: {err}");
        assert_eq!(uids(&out), want, "uid {uid} {args:?}");
    }
    // Another user's record by its id is as if it did not exist.
    let all = as_uid(OPERATOR, &["history", "--daemon", "--json"]).1;
    let bobs = all
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["producer"]["uid"] == BOB)
        .unwrap();
    let id = bobs["correlationId"].as_str().unwrap();
    let (code, out, _) = as_uid(ALICE, &["history", id, "--daemon", "--json"]);
    assert_ne!(code, Some(0));
    assert!(!out.contains(id));
}
