//! Access control with real uids: the test (root, the daemon's uid) runs the `askbus` CLI as
//! other uids (setuid in the child, as setpriv/runuser would) against a daemon whose config
//! lists them. Forbidden connects and roles, per-user isolation of question text, forbidden
//! answers, operators, and the per-uid quotas.

use crate::harness as common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{choice_request, rt, Daemon};
use serde_json::{json, Value};

const ALICE: u32 = 61001;
const BOB: u32 = 61002;
const OPERATOR: u32 = 61003;
const ASK_ONLY: u32 = 61004;
const STRANGER: u32 = 61009;

/// The CLI and the questions file, copied where every uid can reach them: the checkout (and
/// its target/) may sit under a directory other uids cannot traverse (a 0700 home), and the
/// children run as those uids.
/// A static is never dropped, so the copy lives in `/tmp/askbus-access-<pid>` and each run
/// first removes the copies of test processes that are gone (a copy is as big as the CLI).
struct Reachable {
    cli: std::path::PathBuf,
    questions: String,
}

fn reachable() -> &'static Reachable {
    static R: std::sync::OnceLock<Reachable> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        for entry in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("askbus-access-")) else {
                continue;
            };
            let alive = rest
                .parse::<u32>()
                .is_ok_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
            if !alive {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = std::path::PathBuf::from(format!("/tmp/askbus-access-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a dir under /tmp");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cli = dir.join("askbus");
        common::copy_executable(common::cli_bin(), &cli);
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
        let questions = dir.join("database.json");
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/database.json"),
            &questions,
        )
        .unwrap();
        std::fs::set_permissions(&questions, std::fs::Permissions::from_mode(0o644)).unwrap();
        Reachable {
            cli,
            questions: questions.to_str().unwrap().to_owned(),
        }
    })
}

/// The CLI as uid `uid`, against `d`.
fn cli_for(d: &Daemon, uid: u32) -> std::process::Command {
    let mut cmd = std::process::Command::new(&reachable().cli);
    cmd.env("ASKBUS_SOCKET", &d.socket).uid(uid).gid(uid);
    cmd
}
const QUESTION_TEXT: &str = "Which database should the new service use?";

fn is_root() -> bool {
    if askbusd::paths::effective_uid() != 0 {
        eprintln!("skipped: needs root to run clients as other uids");
        return false;
    }
    true
}

/// A daemon whose rules name the test's uids, with a socket every uid can reach (so the
/// daemon's own check is what refuses).
fn shared_daemon(extra: &str) -> Daemon {
    let d = Daemon::builder()
        .config(&format!(
            "{extra}\n[access]\nproducer_users = [{ALICE}, {BOB}, {ASK_ONLY}]\n\
             ui_users = [{ALICE}, {BOB}]\noperator_users = [{OPERATOR}]\n"
        ))
        .start();
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    d
}

fn cli_as(d: &Daemon, uid: u32, args: &[&str]) -> Output {
    cli_for(d, uid).args(args).output().unwrap()
}

fn spawn_ask_as(d: &Daemon, uid: u32) -> Child {
    cli_for(d, uid)
        .args(["ask", &reachable().questions, "--timeout-ms", "60000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Pending ids as uid sees them (`askbus pending --json`), with the raw output.
fn pending_as(d: &Daemon, uid: u32) -> (Vec<String>, String) {
    let out = cli_as(d, uid, &["pending", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "uid {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let ids = frames
        .iter()
        .map(|f| f["correlationId"].as_str().unwrap().to_owned())
        .collect();
    (ids, stdout)
}

async fn stats(d: &Daemon) -> Value {
    let mut c = d.connect().await;
    c.send(json!({"type": "stats"})).await;
    c.recv_type("stats").await
}

/// Waits until the daemon holds `n` pending requests.
fn wait_pending(d: &Daemon, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while rt().block_on(stats(d))["pending"] != n {
        assert!(Instant::now() < deadline, "never {n} pending");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn uids_not_listed_cannot_connect_and_producers_only_cannot_subscribe() {
    if !is_root() {
        return;
    }
    let d = shared_daemon("");
    let out = cli_as(&d, STRANGER, &["stats"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("forbidden") && stderr.contains(&STRANGER.to_string()),
        "{stderr}"
    );
    // Allowed to ask, not to be a UI.
    let out = cli_as(&d, ASK_ONLY, &["pending"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("forbidden") && stderr.contains("UI"),
        "{stderr}"
    );
    let log = d.log_text();
    assert!(
        log.contains("connection refused: uid not allowed") && log.contains("uid=61009"),
        "{log}"
    );
    assert!(
        log.contains("forbidden: uid 61004 may not be a UI") && log.contains("uid=61004"),
        "{log}"
    );
    let stats = rt().block_on(stats(&d));
    assert_eq!(stats["errors"]["forbidden"], 2);
    assert_eq!(stats["connectionsRefused"], 1);
}

#[test]
fn a_ui_sees_and_answers_only_its_own_users_questions() {
    if !is_root() {
        return;
    }
    let d = shared_daemon("");
    let alice_asks = spawn_ask_as(&d, ALICE);
    wait_pending(&d, 1);
    // Bob, another user's UI: nothing, not even a count or the question text.
    let (ids, raw) = pending_as(&d, BOB);
    assert!(ids.is_empty(), "{raw}");
    assert!(!raw.contains(QUESTION_TEXT));
    let human = cli_as(&d, BOB, &["pending"]);
    assert_eq!(
        String::from_utf8_lossy(&human.stdout),
        "No pending questions.\n"
    );
    // Root is the daemon's own uid, so it may be a UI, but it is no operator either.
    let (ids, _) = pending_as(&d, 0);
    assert!(ids.is_empty());
    // The operator sees it; so does Alice's own UI.
    let (ids, raw) = pending_as(&d, OPERATOR);
    assert_eq!(ids.len(), 1, "{raw}");
    assert!(raw.contains(QUESTION_TEXT));
    let id = ids[0].clone();
    let (alice_ids, _) = pending_as(&d, ALICE);
    assert_eq!(alice_ids, std::slice::from_ref(&id));

    // Bob answering it (the id leaked somehow) is forbidden, and logged with his uid.
    let out = cli_as(&d, BOB, &["answer", &id, "--answer", "0=PostgreSQL"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("forbidden"), "{stderr}");
    assert!(!stderr.contains(QUESTION_TEXT));
    let log = d.log_text();
    assert!(
        log.contains("forbidden: correlationId") && log.contains("uid=61002"),
        "{log}"
    );
    wait_pending(&d, 1);

    // Alice's own UI answers, and her agent gets it.
    let out = cli_as(
        &d,
        ALICE,
        &["answer", &id, "--answer", "0=SQLite", "--answer", "1=Yes"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = alice_asks.wait_with_output().unwrap();
    assert!(done.status.success());
    assert!(String::from_utf8_lossy(&done.stdout).contains("Database → SQLite"));
    let records = d.wait_telemetry(1);
    assert_eq!(records[0]["producer"]["uid"], ALICE);
    assert_eq!(records[0]["reason"], "answered");
}

#[test]
fn an_operator_answers_anyones_question() {
    if !is_root() {
        return;
    }
    let d = shared_daemon("");
    let bob_asks = spawn_ask_as(&d, BOB);
    wait_pending(&d, 1);
    let (ids, _) = pending_as(&d, OPERATOR);
    let out = cli_as(&d, OPERATOR, &["answer", &ids[0], "--dismiss"]);
    assert!(out.status.success());
    let done = bob_asks.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(1), "dismissed");
}

#[test]
fn per_uid_quotas_bound_connections_and_pending() {
    if !is_root() {
        return;
    }
    let d = shared_daemon("max_connections_per_uid = 2\nmax_pending_per_uid = 1\n");
    // Alice's one pending question uses her whole pending quota, not Bob's.
    let mut alice = spawn_ask_as(&d, ALICE);
    wait_pending(&d, 1);
    let second = cli_as(
        &d,
        ALICE,
        &["ask", &reachable().questions, "--timeout-ms", "60000"],
    );
    assert_eq!(second.status.code(), Some(4), "rejected");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("uid 61001 already has 1 pending"),
        "{stderr}"
    );
    let mut bob = spawn_ask_as(&d, BOB);
    wait_pending(&d, 2);
    // Root (the test) has quotas of its own: two connections, one pending.
    rt().block_on(async {
        let mut a = served(&d).await;
        let _b = served(&d).await;
        let mut c = d.connect().await;
        c.recv_error("too-many-connections").await;
        c.expect_closed().await;
        a.send(choice_request("root-1")).await;
        a.send(choice_request("root-2")).await;
        let e = a.recv_error("too-many-pending").await;
        assert_eq!(e["correlationId"], "root-2");
    });
    assert!(d
        .log_text()
        .contains("connection refused: too many connections for this uid"));
    alice.kill().unwrap();
    bob.kill().unwrap();
    let _ = (alice.wait(), bob.wait());
}

/// A served connection, retrying while the daemon has yet to notice that an earlier one of
/// this uid closed (its slot is freed then).
async fn served(d: &Daemon) -> common::Raw {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = d.connect().await;
        c.send(json!({"type": "ping"})).await;
        match c.recv_within(Duration::from_secs(5)).await {
            Some(f) if f["type"] == "pong" => return c,
            Some(f) => assert_eq!(f["code"], "too-many-connections", "{f}"),
            None => {}
        }
        assert!(Instant::now() < deadline, "no connection slot freed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `stats` as another uid: the daemon-wide counters are for the daemon's own uid, root and
/// operators; any other uid is told only about itself (its connections, UIs, pending).
#[test]
fn stats_show_another_uid_only_its_own_counts() {
    if !is_root() {
        return;
    }
    let d = shared_daemon("");
    let bob_asks = spawn_ask_as(&d, BOB);
    wait_pending(&d, 1);
    let stats_as = |uid: u32| -> Value {
        let out = cli_as(&d, uid, &["stats", "--json"]);
        assert!(
            out.status.success(),
            "uid {uid}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let alice = stats_as(ALICE);
    assert_eq!(alice["scope"], "own", "{alice}");
    assert_eq!(alice["uid"], ALICE);
    // Alice sees neither Bob's question nor his connection, nor any daemon-wide counter.
    assert_eq!(alice["pending"], 0, "{alice}");
    assert_eq!(alice["producers"], 0, "{alice}");
    assert_eq!(alice["connections"], 1, "her own stats connection: {alice}");
    for daemon_wide in [
        "requests",
        "outcomes",
        "latencyMs",
        "errors",
        "connectionsTotal",
        "framesIn",
    ] {
        assert!(alice.get(daemon_wide).is_none(), "{daemon_wide} in {alice}");
    }
    let bob = stats_as(BOB);
    assert_eq!(
        (bob["scope"].as_str(), bob["pending"].as_u64()),
        (Some("own"), Some(1)),
        "{bob}"
    );
    assert_eq!(bob["producers"], 1, "{bob}");
    // The operator and root (the daemon's uid here) see everything.
    let op = stats_as(OPERATOR);
    assert!(op.get("scope").is_none(), "{op}");
    assert_eq!(op["pending"], 1, "{op}");
    assert!(op["requests"]["accepted"].as_u64() >= Some(1), "{op}");
    let own = rt().block_on(stats(&d));
    assert!(
        own.get("scope").is_none() && own["connectionsTotal"].as_u64() >= Some(4),
        "{own}"
    );
    // The human rendering says what it is.
    let out = cli_as(&d, ALICE, &["stats"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("uid {ALICE}")), "{text}");
    drop(bob_asks);
}
