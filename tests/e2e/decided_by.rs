//! `decidedBy` on the observers' end `bus-event`s, through the real daemon: the same object
//! the history record has, for every kind of end: a person through a UI (with the `via` and
//! `user` it claimed), a rule (with the rule), an editor's answer its producer reported
//! (`answered-elsewhere`, via `acp`), a timeout, no UI, and a producer's withdrawal or exit;
//! and the goldens say what the daemon sends.

use crate::harness as common;

use std::path::Path;

use common::{choice_request, request_with, Daemon, Raw};
use serde_json::{json, Value};

fn golden(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/server")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn client_example(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/client")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn approval(id: &str, tool: &str, args: Value) -> Value {
    json!({"type": "tool-confirmation-request", "correlationId": id,
           "toolCall": {"name": tool, "args": args},
           "outcomes": ["proceed_once", "cancel"], "timeoutMs": 60000, "noUi": "wait"})
}

async fn hello(d: &Daemon, client: &str) -> Raw {
    let mut p = d.connect().await;
    p.send(json!({"type": "hello", "protocol": 1, "client": client}))
        .await;
    p.recv_type("welcome").await;
    p
}

async fn watcher(d: &Daemon) -> Raw {
    let mut w = d.connect().await;
    w.send(json!({"type": "watch", "client": "test-watch/1"}))
        .await;
    w.recv_type("watching").await;
    w
}

/// The next end event of `id` (its `request` event and others' are skipped).
async fn end_of(w: &mut Raw, id: &str) -> Value {
    loop {
        let e = w.recv_type("bus-event").await;
        if e["correlationId"] == id && e["event"] != "request" {
            return e;
        }
    }
}

/// An end event without what differs between runs (the golden's `variable` pointers).
fn strip(v: &Value) -> Value {
    let mut v = v.clone();
    for k in ["ts", "latencyMs"] {
        v.as_object_mut().unwrap().remove(k);
    }
    v["producer"]["pid"] = Value::Null;
    v["producer"]["uid"] = Value::Null;
    if let Some(d) = v.get_mut("decidedBy").and_then(Value::as_object_mut) {
        d.remove("uid");
    }
    v
}

/// `live`'s decidedBy without its uid (the test's own), after checking it is a number.
fn without_uid(live: &Value) -> Value {
    let mut d = live["decidedBy"].clone();
    assert!(d["uid"].is_u64(), "{live}");
    d.as_object_mut().unwrap().remove("uid");
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_end_event_says_who_or_what_decided() {
    let d = Daemon::start();
    let mut w = watcher(&d).await;

    // No UI yet: the default noUi ends it at once, decided by nobody.
    let mut p = hello(&d, "askbus-acp/0.1.0").await;
    p.send(request_with("n1", json!({"noUi": "reject"}))).await;
    p.recv_type("ask-user-response").await;
    let e = end_of(&mut w, "n1").await;
    assert_eq!(
        (&e["event"], &e["decidedBy"]),
        (&json!("no-ui"), &json!({"kind": "no-ui"}))
    );

    // A UI that says it is a chat bridge, answering as alice.
    let mut ui = d.connect().await;
    ui.send(json!({"type": "subscribe", "client": "askbus-telegram/test", "via": "telegram"}))
        .await;
    ui.recv_type("subscribed").await;
    p.send(choice_request("q1")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(json!({"type": "ask-user-response", "correlationId": "q1",
                   "answers": {"0": "SQLite"}, "user": "alice"}))
        .await;
    ui.recv_type("ask-user-ack").await;
    let e = end_of(&mut w, "q1").await;
    assert_eq!(e["event"], "answered");
    assert_eq!(
        without_uid(&e),
        json!({"kind": "human", "via": "telegram", "client": "askbus-telegram/test",
               "user": "alice"}),
        "{e}"
    );

    // The editor answered first (askbus acp): the producer withdraws it, saying so.
    let request = client_example("tool-confirmation-request.json");
    let id = request["correlationId"].as_str().unwrap().to_owned();
    p.send(request).await;
    ui.recv_type("tool-confirmation-request").await;
    p.send(client_example(
        "tool-confirmation-cancel.answered-elsewhere.json",
    ))
    .await;
    ui.recv_type("tool-confirmation-withdrawn").await;
    let e = end_of(&mut w, &id).await;
    assert_eq!(e["event"], "withdrawn");
    assert_eq!(
        without_uid(&e),
        json!({"kind": "human", "via": "acp", "client": "askbus-acp/0.1.0"}),
        "{e}"
    );
    // The golden is this event, its variable parts aside.
    assert_eq!(
        strip(&golden("bus-event.withdrawn.acp.json")),
        strip(&e),
        "{e}"
    );

    // A plain withdrawal is the producer's.
    p.send(approval(
        "e2",
        "run_shell_command",
        json!({"command": "ls"}),
    ))
    .await;
    ui.recv_type("tool-confirmation-request").await;
    p.send(json!({"type": "tool-confirmation-cancel", "correlationId": "e2"}))
        .await;
    ui.recv_type("tool-confirmation-withdrawn").await;
    let e = end_of(&mut w, "e2").await;
    assert_eq!(
        (&e["event"], &e["decidedBy"]),
        (&json!("withdrawn"), &json!({"kind": "producer"}))
    );

    // Nobody answered in time.
    p.send(request_with("t1", json!({"timeoutMs": 1}))).await;
    let e = end_of(&mut w, "t1").await;
    assert_eq!(
        (&e["event"], &e["decidedBy"]),
        (&json!("timeout"), &json!({"kind": "timeout"}))
    );
    ui.recv_type("ask-user-request").await;
    ui.recv_type("ask-user-withdrawn").await;

    // The producer went away.
    let mut gone = hello(&d, "gone/1").await;
    gone.send(choice_request("g1")).await;
    ui.recv_type("ask-user-request").await;
    drop(gone);
    let e = end_of(&mut w, "g1").await;
    assert_eq!(
        (&e["event"], &e["decidedBy"]),
        (&json!("producer-gone"), &json!({"kind": "producer"}))
    );
}

/// The golden's plain UI answer is what a UI that claims nothing gets: `via` `client`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_ui_answer_is_the_golden_one() {
    let d = Daemon::start();
    let mut w = watcher(&d).await;
    let (mut ui, _) = d.ui().await;
    let mut p = hello(&d, "my-agent/1.2.0").await;
    p.send(choice_request("q1")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(common::answer("q1", json!({"0": "SQLite"}))).await;
    ui.recv_type("ask-user-ack").await;
    let e = end_of(&mut w, "q1").await;
    assert_eq!(
        without_uid(&e),
        json!({"kind": "human", "via": "client", "client": "test-ui/1"}),
        "{e}"
    );
    let g = golden("bus-event.answered.json");
    let mut want = without_uid(&g);
    want["client"] = json!("test-ui/1");
    assert_eq!(without_uid(&e), want);
}

/// A rule's decision: `decidedBy` kind `rule`, with the rule as the policy engine names it,
/// on the watchers' `answered` event as in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_decision_is_told_to_the_watchers_with_its_rule() {
    let home = tempfile::tempdir().unwrap();
    let admin = tempfile::tempdir().unwrap();
    let dir = home.path().join("askbus/policies");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mine.toml"),
        "[[rule]]\ntoolName = \"create_issue\"\nmcpName = \"github\"\ndecision = \"allow\"\npriority = 100\n",
    )
    .unwrap();
    let admin = admin.path().display().to_string();
    let d = Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .env("XDG_CONFIG_HOME", home.path())
        .args(&["--policy-admin-dir", admin.as_str()])
        .start();
    let mut w = watcher(&d).await;
    let mut p = hello(&d, "my-agent/1.2.0").await;
    let request = client_example("tool-confirmation-request.mcp.json");
    let id = request["correlationId"].as_str().unwrap().to_owned();
    p.send(request).await;
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(r["outcome"], "proceed_once", "{r}");
    let e = end_of(&mut w, &id).await;
    assert_eq!(e["event"], "answered");
    let by = &e["decidedBy"];
    assert_eq!(by["kind"], "rule", "{e}");
    assert_eq!(
        (
            &by["rule"]["toolName"],
            &by["rule"]["decision"],
            &by["rule"]["source"]
        ),
        (
            &json!("mcp_github_create_issue"),
            &json!("allow"),
            &json!("User: mine.toml")
        ),
        "{e}"
    );
    assert!(by.get("via").is_none() && by.get("uid").is_none(), "{e}");
    // The golden is this event, its variable parts aside.
    assert_eq!(
        strip(&golden("bus-event.answered.rule.json")),
        strip(&e),
        "{e}"
    );
}
