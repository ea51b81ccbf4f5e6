//! Federation across askbusd nodes through a real, stock nats-server (core NATS): a question asked on
//! one node is shown on the others, answered from any of them, and withdrawn everywhere with
//! the reason its origin decided.

use crate::harness as common;
use crate::pty;

use std::time::Duration;

use common::nats::{fed_stats, node, node_with_args, wait_remote_pending, wait_sees, Nats};
use common::{answer, choice_request, request_with, rt, Daemon, Raw};
use futures_util::StreamExt as _;
use serde_json::{json, Value};

/// Three nodes A, B, C on one server, each seeing the other two.
async fn three(nats: &Nats, extra: &str) -> (Daemon, Daemon, Daemon) {
    let url = nats.url();
    let args = ["--max-pending-per-connection", "5000"];
    let a = node_with_args(&url, "A", &args, extra);
    let b = node_with_args(&url, "B", &args, extra);
    let c = node_with_args(&url, "C", &args, extra);
    wait_sees(&a, &["B", "C"]).await;
    wait_sees(&b, &["A", "C"]).await;
    wait_sees(&c, &["A", "B"]).await;
    (a, b, c)
}

/// Asserts a live frame has exactly the fields (nested too) of its golden example in
/// proto/examples/server (the federated ones are written by hand; this keeps them honest).
fn like_golden(live: &Value, example: &str) {
    fn shape(v: &Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
        if let Value::Object(map) = v {
            // The request's own context is the context tests' business, not federation's.
            for (k, v) in map.iter().filter(|(k, _)| *k != "context") {
                let path = format!("{at}/{k}");
                out.insert(path.clone());
                if k != "questions" && k != "toolCall" && k != "details" {
                    shape(v, &path, out);
                }
            }
        }
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/server")
        .join(example);
    let golden: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut a, mut b) = (Default::default(), Default::default());
    shape(live, "", &mut a);
    shape(&golden, "", &mut b);
    assert_eq!(a, b, "{example}: {live}");
}

/// The frame's JSON text with its correlationId replaced, to compare two responses.
fn without_id(v: &Value) -> String {
    let mut v = v.clone();
    v["correlationId"] = json!("-");
    v.to_string()
}

#[test]
fn an_answer_from_b_reaches_the_producer_on_a_as_a_local_answer_would_and_c_withdraws() {
    let nats = Nats::start();
    rt().block_on(async {
        let (a, b, c) = three(&nats, "").await;
        let (mut ui_a, _) = a.ui().await;
        let (mut ui_b, _) = b.ui().await;
        let (mut ui_c, _) = c.ui().await;
        let mut watcher = a.connect().await;
        watcher.send(json!({"type": "watch"})).await;
        watcher.recv_type("watching").await;
        let mut producer = a.connect().await;
        producer.send(json!({"type": "hello", "protocol": 1, "client": "agent/1"})).await;
        producer.recv_type("welcome").await;

        // The reference: answered by a UI on A itself.
        producer.send(choice_request("local-1")).await;
        let shown = ui_a.recv_type("ask-user-request").await;
        assert_eq!(shown["node"], "A", "{shown}");
        for ui in [&mut ui_b, &mut ui_c] {
            let r = ui.recv_type("ask-user-request").await;
            assert_eq!(r["correlationId"], "local-1");
        }
        ui_a.send(answer("local-1", json!({"0": "PostgreSQL"}))).await;
        ui_a.recv_type("ask-user-ack").await;
        let local = producer.recv_type("ask-user-response").await;
        for ui in [&mut ui_b, &mut ui_c] {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(w["reason"], "answered", "{w}");
            assert_eq!(w["answeredBy"]["node"], "A", "{w}");
        }

        // Across nodes: asked on A, answered on B.
        producer.send(choice_request("fed-1")).await;
        ui_a.recv_type("ask-user-request").await;
        let on_b = ui_b.recv_type("ask-user-request").await;
        assert_eq!(on_b["node"], "A", "{on_b}");
        like_golden(&on_b, "ask-user-request.federated.json");
        assert_eq!(on_b["producer"]["client"], "agent/1", "{on_b}");
        assert_eq!(on_b["questions"], shown["questions"]);
        let on_c = ui_c.recv_type("ask-user-request").await;
        assert_eq!(on_c["correlationId"], "fed-1");
        ui_b.send(answer("fed-1", json!({"0": "PostgreSQL"}))).await;
        let ack = ui_b.recv_type("ask-user-ack").await;
        assert_eq!(ack["outcome"], "answered");
        let remote = producer.recv_type("ask-user-response").await;
        assert_eq!(without_id(&remote), without_id(&local), "a remote answer reads as a local one");
        for ui in [&mut ui_a, &mut ui_c] {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(w["correlationId"], "fed-1");
            assert_eq!(w["reason"], "answered", "{w}");
            assert_eq!(w["node"], "A", "{w}");
            assert_eq!(w["answeredBy"]["node"], "B", "{w}");
            assert_eq!(w["answeredBy"]["client"], "test-ui/1", "{w}");
            like_golden(&w, "ask-user-withdrawn.federated.json");
        }
        // B's UI got its ack and no withdrawal; a second answer is not-pending, as locally.
        ui_b.send(answer("fed-1", json!({"0": "SQLite"}))).await;
        ui_b.recv_error("not-pending").await;
        ui_c.send(answer("fed-1", json!({"0": "SQLite"}))).await;
        let late = ui_c.recv_error("not-pending").await;
        assert_eq!(late["correlationId"], "fed-1");
        producer.expect_silence(Duration::from_millis(200)).await;

        // The origin's watchers see who answered, and where.
        let event = loop {
            let e = watcher.recv_type("bus-event").await;
            if e["correlationId"] == "fed-1" && e["event"] == "answered" {
                break e;
            }
        };
        assert_eq!((event["node"].clone(), event["ui"]["node"].clone()), (json!("A"), json!("B")), "{event}");
        like_golden(&event, "bus-event.answered.federated.json");

        // Telemetry is the origin's, and names the node and UI that answered.
        let records = a.wait_telemetry(2);
        let fed = records.iter().find(|r| r["correlationId"] == "fed-1").expect("record");
        assert_eq!(fed["reason"], "answered");
        assert_eq!(fed["node"], "A");
        assert_eq!(fed["ui"]["node"], "B", "{fed}");
        assert_eq!(fed["ui"]["client"], "test-ui/1", "{fed}");
        assert!(b.telemetry_records().is_empty(), "only the origin writes telemetry");

        // An invalid answer from B is refused by A as a local one would be, and stays pending.
        producer.send(choice_request("fed-2")).await;
        for ui in [&mut ui_a, &mut ui_b, &mut ui_c] {
            ui.recv_type("ask-user-request").await;
        }
        ui_b.send(answer("fed-2", json!({"5": "x"}))).await;
        let err = ui_b.recv_error("invalid-response").await;
        assert_eq!(err["correlationId"], "fed-2");
        ui_c.send(json!({"type": "ask-user-response", "correlationId": "fed-2", "answers": {}, "cancelled": true})).await;
        assert_eq!(ui_c.recv_type("ask-user-ack").await["outcome"], "dismissed");
        let dismissed = producer.recv_type("ask-user-response").await;
        assert_eq!(dismissed["reason"], "dismissed");
        let w = ui_b.recv_type("ask-user-withdrawn").await;
        assert_eq!(w["answeredBy"]["node"], "C", "{w}");
        ui_a.recv_type("ask-user-withdrawn").await;
        // Issue 27 item 14: a server with no authentication is warned about, once.
        let log = a.log_text();
        assert_eq!(log.matches("federating with no NATS authentication").count(), 1, "{log}");
    });
}

#[test]
fn timeout_and_cancel_on_a_withdraw_on_b_and_c_with_the_same_reason() {
    let nats = Nats::start();
    rt().block_on(async {
        let (a, b, c) = three(&nats, "").await;
        let (mut ui_b, _) = b.ui().await;
        let (mut ui_c, _) = c.ui().await;
        let mut producer = a.connect().await;
        producer
            .send(request_with("t-1", json!({"timeoutMs": 300})))
            .await;
        producer.send(choice_request("c-1")).await;
        for ui in [&mut ui_b, &mut ui_c] {
            assert_eq!(
                ui.recv_type("ask-user-request").await["correlationId"],
                "t-1"
            );
            assert_eq!(
                ui.recv_type("ask-user-request").await["correlationId"],
                "c-1"
            );
        }
        let timed_out = producer.recv_type("ask-user-response").await;
        assert_eq!(timed_out["reason"], "timeout");
        for ui in [&mut ui_b, &mut ui_c] {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(
                (w["correlationId"].clone(), w["reason"].clone()),
                (json!("t-1"), json!("timeout")),
                "{w}"
            );
        }
        producer
            .send(json!({"type": "ask-user-cancel", "correlationId": "c-1"}))
            .await;
        assert_eq!(
            producer.recv_type("ask-user-response").await["reason"],
            "withdrawn"
        );
        for ui in [&mut ui_b, &mut ui_c] {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(
                (w["correlationId"].clone(), w["reason"].clone()),
                (json!("c-1"), json!("withdrawn")),
                "{w}"
            );
        }
        // A producer that goes away: producer-gone everywhere.
        producer.send(choice_request("g-1")).await;
        ui_b.recv_type("ask-user-request").await;
        ui_c.recv_type("ask-user-request").await;
        drop(producer);
        for ui in [&mut ui_b, &mut ui_c] {
            assert_eq!(
                ui.recv_type("ask-user-withdrawn").await["reason"],
                "producer-gone"
            );
        }
        wait_remote_pending(&b, 0).await;
    });
}

#[test]
fn a_node_that_joins_late_and_a_ui_that_subscribes_late_are_replayed_every_pending_question() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let mut producer = a.connect().await;
        for i in 0..5 {
            producer.send(choice_request(&format!("q-{i}"))).await;
        }
        producer.ping().await;
        let b = node_with_args(&url, "B", &["--metrics-listen", "{socket}.metrics"], "");
        wait_sees(&b, &["A"]).await;
        wait_remote_pending(&b, 5).await;
        let metrics = common::parse_metrics(&common::scrape_unix(
            &b.socket.with_extension("sock.metrics"),
        ));
        assert_eq!(metrics["askbus_federation_connected"], 1.0);
        assert_eq!(metrics["askbus_federation_nodes"], 1.0);
        assert_eq!(metrics["askbus_federation_remote_pending"], 5.0);
        let (mut ui_b, n) = b.ui().await;
        assert_eq!(n, 5);
        let mut ids = Vec::new();
        for _ in 0..5 {
            let r = ui_b.recv_type("ask-user-request").await;
            assert_eq!(r["node"], "A");
            assert!(r["timeoutMs"].as_u64().unwrap() > 500_000, "{r}");
            ids.push(r["correlationId"].as_str().unwrap().to_owned());
        }
        ids.sort();
        assert_eq!(ids, ["q-0", "q-1", "q-2", "q-3", "q-4"]);
        ui_b.send(answer("q-3", json!({"0": "SQLite"}))).await;
        ui_b.recv_type("ask-user-ack").await;
        let resp = producer.recv_type("ask-user-response").await;
        assert_eq!(resp["correlationId"], "q-3");
        assert_eq!(resp["answers"]["0"], "SQLite");
    });
}

#[test]
fn b_and_c_race_on_many_questions_one_winner_and_one_terminal_frame_each() {
    const N: usize = 1000;
    let nats = Nats::start();
    rt().block_on(async {
        let (a, b, c) = three(&nats, "").await;
        let (ui_b, _) = b.ui().await;
        let (ui_c, _) = c.ui().await;
        let mut producer = a.connect().await;
        for i in 0..N {
            producer.send(choice_request(&format!("r-{i}"))).await;
        }
        // Each UI answers every question it is shown, and is told the fate of every answer:
        // an ack, or not-pending (the other node won).
        async fn racer(mut ui: Raw, label: &'static str) -> (Raw, Vec<String>) {
            let mut won = Vec::new();
            let (mut settled, mut sent, mut refused) = (0, 0, 0);
            while settled < N || won.len() + refused < sent {
                let Some(f) = ui.recv_within(Duration::from_secs(10)).await else {
                    panic!("{label}: stuck after {settled} settled, {sent} sent, {} won, {refused} refused", won.len());
                };
                match f["type"].as_str().unwrap() {
                    "ask-user-request" => {
                        let id = f["correlationId"].as_str().unwrap();
                        ui.send(answer(id, json!({"0": label}))).await;
                        sent += 1;
                    }
                    "ask-user-ack" => {
                        won.push(f["correlationId"].as_str().unwrap().to_owned());
                        settled += 1;
                    }
                    "ask-user-withdrawn" => {
                        assert_eq!(f["reason"], "answered", "{f}");
                        settled += 1;
                    }
                    "error" => {
                        assert_eq!(f["code"], "not-pending", "{f}");
                        refused += 1;
                    }
                    _ => panic!("unexpected {f}"),
                }
            }
            assert_eq!(sent, N, "{label} was shown every question once");
            (ui, won)
        }
        let (rb, rc) = tokio::join!(racer(ui_b, "B"), racer(ui_c, "C"));
        let (mut won_b, mut won_c) = (rb.1, rc.1);
        assert_eq!(
            won_b.len() + won_c.len(),
            N,
            "exactly one winner per question"
        );
        let mut by_id = std::collections::HashMap::new();
        for _ in 0..N {
            let r = producer.recv_type("ask-user-response").await;
            let id = r["correlationId"].as_str().unwrap().to_owned();
            assert!(
                by_id
                    .insert(id, r["answers"]["0"].as_str().unwrap().to_owned())
                    .is_none(),
                "two terminal frames"
            );
        }
        producer.expect_silence(Duration::from_millis(300)).await;
        for id in won_b.drain(..) {
            assert_eq!(
                by_id[&id], "B",
                "{id}: the acked UI's answer is the one delivered"
            );
        }
        for id in won_c.drain(..) {
            assert_eq!(by_id[&id], "C", "{id}");
        }
        // The losers' late answers were all refused: nothing else arrives.
        let (mut ui_b, mut ui_c) = (rb.0, rc.0);
        ui_b.ping().await;
        ui_c.ping().await;
    });
}

#[test]
fn a_sigkilled_origin_s_questions_leave_the_other_nodes_within_the_bound() {
    let nats = Nats::start();
    rt().block_on(async {
        let (mut a, b, c) = three(&nats, "").await;
        let (mut ui_b, _) = b.ui().await;
        let (mut ui_c, _) = c.ui().await;
        let mut producer = a.connect().await;
        producer.send(choice_request("k-1")).await;
        ui_b.recv_type("ask-user-request").await;
        ui_c.recv_type("ask-user-request").await;
        a.kill();
        // The documented bound with the defaults: 6 s without a heartbeat (+ one 2 s beat).
        let bound = Duration::from_secs(8) + Duration::from_secs(2);
        for ui in [&mut ui_b, &mut ui_c] {
            let w = ui
                .recv_within(bound)
                .await
                .expect("withdrawn within the bound");
            assert_eq!(w["type"], "ask-user-withdrawn", "{w}");
            assert_eq!(w["reason"], "producer-gone", "{w}");
        }
        // An answer to it now is not-pending, as for any ended question.
        ui_b.send(answer("k-1", json!({"0": "SQLite"}))).await;
        ui_b.recv_error("not-pending").await;
        // A restarted A ends what its previous life left in the bucket: C (joining late) does
        // not show it.
        a.restart();
        wait_sees(&b, &["A"]).await;
        let late = node(&nats.url(), "D", "");
        wait_sees(&late, &["A", "B", "C"]).await;
        let (mut ui_d, n) = late.ui().await;
        assert_eq!(n, 0);
        ui_d.expect_silence(Duration::from_millis(300)).await;
    });
}

#[test]
fn nats_down_the_local_bus_works_remote_answers_are_refused_and_a_restart_loses_nothing() {
    let mut nats = Nats::start();
    rt().block_on(async {
        let (a, b) = {
            let url = nats.url();
            let a = node(&url, "A", "");
            let b = node(&url, "B", "");
            wait_sees(&a, &["B"]).await;
            wait_sees(&b, &["A"]).await;
            (a, b)
        };
        let (mut ui_a, _) = a.ui().await;
        let (mut ui_b, _) = b.ui().await;
        let mut producer = a.connect().await;
        for id in ["p-1", "p-2", "p-3"] {
            producer.send(choice_request(id)).await;
            ui_a.recv_type("ask-user-request").await;
            ui_b.recv_type("ask-user-request").await;
        }
        producer.send(approval("ap-x", json!({}))).await;
        ui_a.recv_type("tool-confirmation-request").await;
        ui_b.recv_type("tool-confirmation-request").await;
        nats.kill();
        // Wait for B to notice.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while fed_stats(&b).await["connected"] == true {
            assert!(
                std::time::Instant::now() < deadline,
                "B never noticed NATS was gone"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Refused at once, with a clear error; the question stays.
        ui_b.send(answer("p-1", json!({"0": "SQLite"}))).await;
        let err = ui_b.recv_error("origin-unreachable").await;
        assert_eq!(err["correlationId"], "p-1");
        like_golden(&err, "error.origin-unreachable.json");
        assert!(
            err["message"].as_str().unwrap().contains("still pending"),
            "{err}"
        );
        // The local bus is unchanged on A: answer one, ask one.
        ui_a.send(answer("p-2", json!({"0": "SQLite"}))).await;
        ui_a.recv_type("ask-user-ack").await;
        assert_eq!(
            producer.recv_type("ask-user-response").await["correlationId"],
            "p-2"
        );
        producer.send(choice_request("p-4")).await;
        ui_a.recv_type("ask-user-request").await;
        // An approval's decision, too, is refused while the origin cannot be reached: never
        // an approval on failure, and the producer hears nothing.
        ui_b.send(decide("ap-x", "proceed_once")).await;
        let err = ui_b.recv_error("origin-unreachable").await;
        assert_eq!(err["correlationId"], "ap-x");
        producer.expect_silence(Duration::from_millis(100)).await;

        nats.restart();
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        // B learns p-2 ended while it was away, and is shown p-4.
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let f = ui_b.recv().await;
            seen.push((
                f["type"].as_str().unwrap().to_owned(),
                f["correlationId"].as_str().unwrap().to_owned(),
            ));
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                ("ask-user-request".to_owned(), "p-4".to_owned()),
                ("ask-user-withdrawn".to_owned(), "p-2".to_owned())
            ]
        );
        wait_remote_pending(&b, 4).await;
        // Every pending question is answerable from B, once.
        for id in ["p-1", "p-3", "p-4"] {
            ui_b.send(answer(id, json!({"0": "PostgreSQL"}))).await;
            assert_eq!(ui_b.recv_type("ask-user-ack").await["correlationId"], id);
            let r = producer.recv_type("ask-user-response").await;
            assert_eq!(r["correlationId"], id);
            assert_eq!(
                ui_a.recv_type("ask-user-withdrawn").await["correlationId"],
                id
            );
        }
        // The approval, decided on B now, is approved once.
        ui_b.send(decide("ap-x", "proceed_once")).await;
        assert_eq!(
            ui_b.recv_type("tool-confirmation-ack").await["confirmed"],
            true
        );
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!(
            (r["correlationId"].clone(), r["confirmed"].clone()),
            (json!("ap-x"), json!(true))
        );
        ui_a.recv_type("tool-confirmation-withdrawn").await;
        producer.expect_silence(Duration::from_millis(300)).await;
        assert!(fed_stats(&b).await["reconnects"].as_u64().unwrap() >= 1);
    });
}

/// The shipped config's three nodes: devbox and laptop may answer each other, ci may
/// answer nobody and sees only devbox's questions.
async fn shipped_three(nats: &Nats) -> (Daemon, Daemon, Daemon) {
    let url = nats.url();
    let devbox = node(&url, "devbox", &nats.creds("devbox"));
    let laptop = node(&url, "laptop", &nats.creds("laptop"));
    let ci = node(&url, "ci", &nats.creds("ci"));
    // ci does not see laptop (the config denies it laptop's subject), so neither learns of the
    // other unless laptop shares something.
    wait_sees(&devbox, &["laptop", "ci"]).await;
    wait_sees(&laptop, &["devbox"]).await;
    wait_sees(&ci, &["devbox"]).await;
    (devbox, laptop, ci)
}

#[test]
fn a_node_without_permission_cannot_answer_and_its_ui_is_told_why() {
    let nats = Nats::shipped();
    rt().block_on(async {
        let url = nats.url();
        let (devbox, laptop, ci) = shipped_three(&nats).await;
        let (mut ui_laptop, _) = laptop.ui().await;
        let (mut ui_ci, _) = ci.ui().await;
        let mut producer = devbox.connect().await;
        producer.send(choice_request("perm-1")).await;
        ui_laptop.recv_type("ask-user-request").await;
        ui_ci.recv_type("ask-user-request").await;
        ui_ci.send(answer("perm-1", json!({"0": "SQLite"}))).await;
        let err = ui_ci.recv_error("forbidden").await;
        assert_eq!(err["correlationId"], "perm-1");
        let msg = err["message"].as_str().unwrap();
        assert!(
            msg.contains("Permissions Violation") && msg.contains("askbus.answer.devbox.ci"),
            "{msg}"
        );
        // Still pending: laptop (allowed) answers it.
        ui_laptop
            .send(answer("perm-1", json!({"0": "PostgreSQL"})))
            .await;
        ui_laptop.recv_type("ask-user-ack").await;
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["answers"]["0"], "PostgreSQL");
        let w = ui_ci.recv_type("ask-user-withdrawn").await;
        assert_eq!(w["answeredBy"]["node"], "laptop");
        // A wrong password: the node runs, its local bus works, it says it is not connected.
        let bad = node(
            &url,
            "D",
            "user = \"devbox\"\npassword_file = \"/dev/null\"",
        );
        let mut p = bad.connect().await;
        p.ping().await;
        assert_eq!(fed_stats(&bad).await["connected"], false);
    });
}

/// A NATS client holding `user`'s credentials of the shipped config: the rogue of the attacks.
async fn rogue(nats: &Nats, user: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(user.into(), format!("{user}-secret"))
        .custom_inbox_prefix(format!("_INBOX_{user}"))
        .connect(nats.url())
        .await
        .expect("the rogue connects with its node's credentials")
}

/// Waits until `d`'s federation stats count `n` refused answers.
async fn wait_refused(d: &Daemon, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let f = fed_stats(d).await;
        if f["refused"].as_u64().unwrap_or(0) >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never refused {n}: {f}\n{}",
            d.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_jetstream_consumer_delivering_to_the_answer_subject_approves_nothing() {
    // Issue 27 item 1, by construction: the shipped config grants no node anything of $JS (and
    // its account no JetStream), so ci, which may answer nobody, cannot store a forged approval
    // nor have the server deliver one to devbox's answer subject, even on a server with
    // JetStream on. And a message shaped like a JetStream delivery (reply `$JS.ACK…`) on an
    // answer subject is refused by the origin whoever publishes it.
    let nats = Nats::shipped_with(&["-js"]);
    rt().block_on(async {
        let (devbox, laptop, _ci) = shipped_three(&nats).await;
        let (mut ui_laptop, _) = laptop.ui().await;
        let mut producer = devbox.connect().await;
        producer.send(approval("curl-sh", json!({}))).await;
        let shown = ui_laptop.recv_type("tool-confirmation-request").await;
        assert_eq!(shown["correlationId"], "curl-sh");

        let client = rogue(&nats, "ci").await;
        let js = async_nats::jetstream::new(client.clone());
        let stream = js
            .create_stream(async_nats::jetstream::stream::Config {
                name: "forge".into(),
                subjects: vec!["askbus.q.ci".into()],
                ..Default::default()
            })
            .await;
        assert!(stream.is_err(), "ci created a stream: {stream:?}");
        let forged = serde_json::to_vec(&json!({
            "type": "tool-confirmation-response", "correlationId": "curl-sh",
            "confirmed": true, "outcome": "proceed_once",
            "ui": {"node": "laptop", "client": "test-ui/1"}
        }))
        .unwrap();
        let published = js.publish("askbus.q.ci", forged.clone().into()).await;
        if let Ok(ack) = published {
            assert!(ack.await.is_err(), "ci stored a message in JetStream");
        }
        // laptop may answer devbox, but a message shaped like a JetStream delivery (its reply
        // an ack subject) is no answer: the server does not even carry it (laptop may not
        // publish to $JS), and the origin would refuse it (`request_shape`).
        let laptop_rogue = rogue(&nats, "laptop").await;
        laptop_rogue
            .publish_with_reply(
                "askbus.answer.devbox.laptop",
                "$JS.ACK.forge.c.1.1.1.0.0",
                forged.into(),
            )
            .await
            .unwrap();
        laptop_rogue.flush().await.unwrap();
        producer.expect_silence(Duration::from_millis(300)).await;
        // The approval is still pending: laptop's real decision is the one the producer gets.
        ui_laptop.send(decide("curl-sh", "cancel")).await;
        ui_laptop.recv_type("tool-confirmation-ack").await;
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!(r["confirmed"], false, "{r}");
        assert_eq!(r["outcome"], "cancel", "{r}");
    });
}

#[test]
fn an_answer_claiming_another_node_in_its_payload_is_recorded_as_its_sender() {
    // Issue 27 item 16: laptop's rogue client answers as "devbox-admin" in `ui.node`; the
    // origin records the node the server let publish, laptop.
    let nats = Nats::shipped();
    rt().block_on(async {
        let (devbox, _laptop, _ci) = shipped_three(&nats).await;
        let mut producer = devbox.connect().await;
        producer.send(choice_request("spoof-1")).await;
        wait_shared(&devbox, 1).await;
        let client = rogue(&nats, "laptop").await;
        let body = json!({"type": "ask-user-response", "correlationId": "spoof-1",
                          "answers": {"0": "SQLite"}, "cancelled": false,
                          "ui": {"node": "ci", "client": "spoofed"}});
        let reply = client
            .request(
                "askbus.answer.devbox.laptop",
                serde_json::to_vec(&body).unwrap().into(),
            )
            .await
            .expect("devbox replies");
        let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(reply["outcome"], "answered", "{reply}");
        producer.recv_type("ask-user-response").await;
        let records = devbox.wait_telemetry(1);
        assert_eq!(records[0]["ui"]["node"], "laptop", "{}", records[0]);
        // And a reply outside the sender's inbox is refused: nobody reads laptop's answers
        // through another node's inbox, and nobody makes devbox answer into one.
        producer.send(choice_request("spoof-2")).await;
        wait_shared(&devbox, 1).await;
        client
            .publish_with_reply(
                "askbus.answer.devbox.laptop",
                "_INBOX_ci.stolen",
                serde_json::to_vec(
                    &json!({"type": "ask-user-response", "correlationId": "spoof-2",
                    "answers": {"0": "SQLite"}, "cancelled": false}),
                )
                .unwrap()
                .into(),
            )
            .await
            .unwrap();
        wait_refused(&devbox, 1).await;
        assert_eq!(fed_stats(&devbox).await["sharedPending"], 1);
    });
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A v2 share of `questions` as `askbus.q.<node>` carries it.
fn share(epoch: u64, seq: u64, id: &str, questions: Value, deadline_ms: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "v": 2, "epoch": epoch, "seq": seq, "correlationId": id, "questions": questions,
        "timeoutMs": deadline_ms.saturating_sub(now_ms()), "deadlineMs": deadline_ms,
    }))
    .unwrap()
}

#[test]
fn shares_over_this_node_s_limits_are_refused_and_logged_with_the_sending_node() {
    // Issue 27 item 9: ci's rogue client shares questions on ci's own subject past laptop's
    // per-node count, one larger than laptop's max_frame_bytes, and deadlines ten years out.
    let nats = Nats::shipped();
    rt().block_on(async {
        let url = nats.url();
        let limits = [
            "--max-pending-per-uid",
            "2",
            "--max-timeout-ms",
            "60000",
            "--max-frame-bytes",
            "65536",
        ];
        let laptop = node_with_args(&url, "laptop", &limits, &nats.creds("laptop"));
        wait_sees(&laptop, &[]).await;
        let (mut ui, _) = laptop.ui().await;
        let client = rogue(&nats, "ci").await;
        let far = now_ms() + 10 * 365 * 86_400_000u64;
        let epoch = now_ms();
        let mut big = choice_request("big")["questions"].clone();
        big[0]["question"] = json!("x".repeat(100_000));
        let q = |id: &str| choice_request(id)["questions"].clone();
        for (seq, body) in [
            share(epoch, 1, "lim-1", q("lim-1"), far),
            share(epoch, 2, "lim-2", q("lim-2"), far),
            share(epoch, 3, "lim-3", q("lim-3"), far),
            share(epoch, 4, "big", big, far),
        ]
        .into_iter()
        .enumerate()
        {
            client.publish("askbus.q.ci", body.into()).await.unwrap();
            let _ = seq;
        }
        client.flush().await.unwrap();
        // Two shown, each with the local deadline cap; the third and the big one refused.
        for _ in 0..2 {
            let shown = match ui.recv_within(Duration::from_secs(10)).await {
                Some(f) => f,
                None => panic!("nothing shown:\n{}", laptop.log_text()),
            };
            assert!(
                ["lim-1", "lim-2"].contains(&shown["correlationId"].as_str().unwrap()),
                "{shown}"
            );
            assert_eq!(shown["node"], "ci");
            assert!(shown["timeoutMs"].as_u64().unwrap() <= 60_000, "{shown}");
        }
        wait_refused(&laptop, 2).await;
        wait_remote_pending(&laptop, 2).await;
        let log = laptop.log_text();
        assert!(
            log.contains("larger than max_frame_bytes") && log.contains("node=\"ci\""),
            "{log}"
        );
        assert!(log.contains("node ci has 2 questions shown here"), "{log}");
        ui.expect_silence(Duration::from_millis(200)).await;
        // Authenticated on loopback: no transport warning.
        assert!(!log.contains("no NATS authentication"), "{log}");
    });
}

#[test]
fn a_replayed_or_stale_share_is_not_shown_again_and_another_version_is_refused() {
    // ci's rogue client shares, ends, then replays the share (same epoch and sequence number)
    // and sends one of an earlier run: neither comes back. A message of the old layout (v1)
    // is refused and logged as another protocol version, once.
    let nats = Nats::shipped();
    rt().block_on(async {
        let laptop = node(&nats.url(), "laptop", &nats.creds("laptop"));
        wait_sees(&laptop, &[]).await;
        let (mut ui, _) = laptop.ui().await;
        let client = rogue(&nats, "ci").await;
        let epoch = now_ms();
        let deadline = now_ms() + 60_000;
        let q = choice_request("r-1")["questions"].clone();
        let first = share(epoch, 1, "r-1", q.clone(), deadline);
        client.publish("askbus.q.ci", first.clone().into()).await.unwrap();
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "r-1");
        let end = json!({"v": 2, "epoch": epoch, "seq": 2, "correlationId": "r-1", "ended": "timeout"});
        client
            .publish("askbus.q.ci", serde_json::to_vec(&end).unwrap().into())
            .await
            .unwrap();
        let w = ui.recv_type("ask-user-withdrawn").await;
        assert_eq!((w["correlationId"].clone(), w["reason"].clone()), (json!("r-1"), json!("timeout")));
        client.publish("askbus.q.ci", first.into()).await.unwrap();
        let older = share(epoch - 1, 3, "r-1", q.clone(), deadline);
        client.publish("askbus.q.ci", older.into()).await.unwrap();
        let v1 = json!({"v": 1, "node": "ci", "correlationId": "r-2", "questions": q, "deadlineMs": deadline});
        for _ in 0..2 {
            client
                .publish("askbus.q.ci", serde_json::to_vec(&v1).unwrap().into())
                .await
                .unwrap();
        }
        // A marker after them: once it is shown, they were read (one connection, in order).
        let marker = share(epoch, 3, "r-3", choice_request("r-3")["questions"].clone(), deadline);
        client.publish("askbus.q.ci", marker.into()).await.unwrap();
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "r-3");
        wait_remote_pending(&laptop, 1).await;
        wait_refused(&laptop, 2).await;
        let log = laptop.log_text();
        assert_eq!(
            log.matches("speaks federation protocol v1").count(),
            1,
            "{log}"
        );
    });
}

#[test]
fn a_node_cannot_share_or_end_under_another_node_s_name_nor_claim_its_name() {
    // Issue 27 items 2 and 16 by construction: ci may publish only askbus.q.ci. A share or an
    // end on devbox's subject is refused by the server; a share on its own subject that says
    // "devbox" inside is shown as ci's. And an askbusd run as --node devbox with ci's
    // credentials shares nothing (the server refuses its subject) and says why.
    let nats = Nats::shipped();
    rt().block_on(async {
        let (devbox, laptop, _ci) = shipped_three(&nats).await;
        let (mut ui, _) = laptop.ui().await;
        let mut producer = devbox.connect().await;
        producer.send(choice_request("real-1")).await;
        assert_eq!(ui.recv_type("ask-user-request").await["correlationId"], "real-1");
        let client = rogue(&nats, "ci").await;
        let epoch = now_ms() + 1_000_000;
        let deadline = now_ms() + 60_000;
        let forged = share(epoch, 1, "forged-1", choice_request("forged-1")["questions"].clone(), deadline);
        client.publish("askbus.q.devbox", forged.into()).await.unwrap();
        let end = json!({"v": 2, "epoch": epoch, "seq": 1, "correlationId": "real-1", "ended": "answered"});
        client
            .publish("askbus.q.devbox", serde_json::to_vec(&end).unwrap().into())
            .await
            .unwrap();
        let mut claimed: Value =
            serde_json::from_slice(&share(epoch, 1, "claimed-1", choice_request("claimed-1")["questions"].clone(), deadline)).unwrap();
        claimed["node"] = json!("devbox");
        client
            .publish("askbus.q.ci", serde_json::to_vec(&claimed).unwrap().into())
            .await
            .unwrap();
        client.flush().await.unwrap();
        let shown = ui.recv_type("ask-user-request").await;
        assert_eq!(shown["correlationId"], "claimed-1", "{shown}");
        assert_eq!(shown["node"], "ci", "{shown}");
        ui.expect_silence(Duration::from_millis(300)).await;
        // real-1 is still pending, and answerable.
        ui.send(answer("real-1", json!({"0": "SQLite"}))).await;
        ui.recv_type("ask-user-ack").await;
        producer.recv_type("ask-user-response").await;

        // A daemon that claims devbox's name with ci's credentials.
        let liar = node(&nats.url(), "devbox", &nats.creds("ci"));
        let deadline_at = std::time::Instant::now() + Duration::from_secs(30);
        while fed_stats(&liar).await["denied"].as_u64().unwrap_or(0) == 0 {
            assert!(std::time::Instant::now() < deadline_at, "{}", liar.log_text());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            liar.log_text().contains("are its credentials those of node devbox"),
            "{}",
            liar.log_text()
        );
        let mut p = liar.connect().await;
        p.send(choice_request("liar-1")).await;
        p.ping().await;
        // Published (the liar believes it) and refused by the server: laptop shows nothing.
        ui.expect_silence(Duration::from_millis(500)).await;
        let log = std::fs::read_to_string(&nats.log).unwrap();
        assert!(
            log.lines().any(|l| l.contains("Violation") && l.contains("askbus.q.devbox")),
            "{log}"
        );
    });
}

#[test]
fn a_node_cannot_read_another_node_s_questions_or_replies() {
    // Issue 27 item 15: ci may see devbox's questions but not laptop's. Neither its daemon nor
    // a rogue client with its credentials receives laptop's shares (live or through sync),
    // laptop's replies, or the answers sent to laptop.
    let nats = Nats::shipped();
    rt().block_on(async {
        let (devbox, laptop, ci) = shipped_three(&nats).await;
        let (mut ui_ci, _) = ci.ui().await;
        let (mut ui_devbox, _) = devbox.ui().await;
        let client = rogue(&nats, "ci").await;
        let mut subs = Vec::new();
        for subject in [
            "askbus.q.laptop",
            "askbus.q.*",
            "askbus.>",
            "_INBOX_laptop.>",
            "askbus.answer.laptop.*",
            ">",
        ] {
            if let Ok(s) = client.subscribe(subject).await {
                subs.push(s);
            }
        }
        client.flush().await.unwrap();
        let mut producer = laptop.connect().await;
        producer.send(choice_request("secret-1")).await;
        // devbox (allowed) sees it and answers it: a request to laptop, a reply to devbox.
        assert_eq!(
            ui_devbox.recv_type("ask-user-request").await["correlationId"],
            "secret-1"
        );
        ui_devbox
            .send(answer("secret-1", json!({"0": "SQLite"})))
            .await;
        ui_devbox.recv_type("ask-user-ack").await;
        producer.recv_type("ask-user-response").await;
        // A sync request for laptop's pending is refused by the server.
        producer.send(choice_request("secret-2")).await;
        ui_devbox.recv_type("ask-user-request").await;
        let synced = client
            .request("askbus.sync.laptop.ci", br#"{"v":2}"#.to_vec().into())
            .await;
        assert!(synced.is_err(), "{synced:?}");
        // A question of devbox's reaches ci, after laptop's: ci's view is ordered, so by the
        // time it shows, laptop's would have.
        let mut devbox_producer = devbox.connect().await;
        devbox_producer.send(choice_request("open-1")).await;
        assert_eq!(
            ui_ci.recv_type("ask-user-request").await["correlationId"],
            "open-1"
        );
        ui_ci.expect_silence(Duration::from_millis(200)).await;
        for mut s in subs {
            while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), s.next()).await
            {
                let text = String::from_utf8_lossy(&m.payload);
                assert!(
                    !text.contains("secret") && !m.subject.contains("laptop"),
                    "ci read {}: {text}",
                    m.subject
                );
            }
        }
    });
}

/// Waits until `d` shares `n` questions.
async fn wait_shared(d: &Daemon, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if fed_stats(d).await["sharedPending"] == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never shared {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A test CA, and a server certificate it signed for 127.0.0.1, made with the openssl CLI.
fn test_ca(dir: &std::path::Path) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=askbus test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "ext",
    ]);
}

#[test]
fn nodes_federate_over_tls_with_a_test_ca() {
    let certs = tempfile::tempdir().unwrap();
    test_ca(certs.path());
    let p = |f: &str| certs.path().join(f).display().to_string();
    let nats = Nats::start_with(
        &[
            "--tls",
            "--tlscert",
            &p("server.pem"),
            "--tlskey",
            &p("server.key"),
        ],
        None,
    )
    .tls();
    rt().block_on(async {
        let url = nats.url();
        assert!(url.starts_with("tls://"));
        let tls = format!("tls_ca = \"{}\"", p("ca.pem"));
        let a = node(&url, "A", &tls);
        let b = node(&url, "B", &tls);
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let (mut ui_b, _) = b.ui().await;
        let mut producer = a.connect().await;
        producer.send(choice_request("tls-1")).await;
        ui_b.recv_type("ask-user-request").await;
        ui_b.send(answer("tls-1", json!({"0": "SQLite"}))).await;
        ui_b.recv_type("ask-user-ack").await;
        assert_eq!(
            producer.recv_type("ask-user-response").await["reason"],
            "answered"
        );
        // A node that does not trust the CA never connects (and says so), yet serves locally.
        let untrusting = node(&url, "C", "");
        untrusting.connect().await.ping().await;
        assert_eq!(fed_stats(&untrusting).await["connected"], false);
    });
}

#[test]
fn a_three_server_cluster_with_a_node_on_each_server() {
    use common::nats::free_port;
    let cluster: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes = cluster
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let servers: Vec<Nats> = (0..3)
        .map(|i| {
            let listen = format!("nats://127.0.0.1:{}", cluster[i]);
            let name = format!("s{i}");
            Nats::start_with(
                &[
                    "--server_name",
                    &name,
                    "--cluster_name",
                    "askbus-test",
                    "--cluster",
                    &listen,
                    "--routes",
                    &routes,
                ],
                None,
            )
        })
        .collect();
    rt().block_on(async {
        let a = node(&servers[0].url(), "A", "");
        let b = node(&servers[1].url(), "B", "");
        let c = node(&servers[2].url(), "C", "");
        wait_sees(&a, &["B", "C"]).await;
        wait_sees(&b, &["A", "C"]).await;
        wait_sees(&c, &["A", "B"]).await;
        let (mut ui_b, _) = b.ui().await;
        let (mut ui_c, _) = c.ui().await;
        let mut producer = a.connect().await;
        producer.send(choice_request("cl-1")).await;
        ui_b.recv_type("ask-user-request").await;
        ui_c.recv_type("ask-user-request").await;
        ui_c.send(answer("cl-1", json!({"0": "PostgreSQL"}))).await;
        ui_c.recv_type("ask-user-ack").await;
        assert_eq!(
            producer.recv_type("ask-user-response").await["answers"]["0"],
            "PostgreSQL"
        );
        let w = ui_b.recv_type("ask-user-withdrawn").await;
        assert_eq!(w["answeredBy"]["node"], "C", "{w}");
    });
}

#[test]
fn askbus_answer_on_b_answers_a_question_asked_on_a() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let mut producer = a.connect().await;
        producer.send(choice_request("cli-1")).await;
        producer.ping().await;
        wait_remote_pending(&b, 1).await;
        let out = b
            .cli()
            .args(["answer", "cli-1", "--answer", "0=PostgreSQL"])
            .output()
            .expect("askbus answer");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["answers"]["0"], "PostgreSQL");
        assert_eq!(r["reason"], "answered");
    });
}

/// `askbus web` on a node: its link's token, and one WebSocket (a tab) speaking the page's
/// protocol: the daemon's UI frames as JSON text messages, answers sent the same way.
mod web {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::process::{Child, Command, Stdio};

    use serde_json::Value;

    pub struct Web {
        child: Child,
        pub port: u16,
        /// The session cookie (`name=value`) and the page's directory (`/<sid>/`).
        cookie: String,
        base: String,
    }

    impl Web {
        pub fn start(socket: &std::path::Path) -> Web {
            let mut child = Command::new(super::common::cli_bin())
                .arg("--socket")
                .arg(socket)
                .args(["web", "--listen", "127.0.0.1:0"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn askbus web");
            let out = BufReader::new(child.stdout.take().expect("stdout"));
            for line in out.lines() {
                let line = line.expect("read stdout");
                if let Some(link) = line.trim().strip_prefix("http://127.0.0.1:") {
                    let (port, path) = link.split_once('/').expect("a path");
                    let port: u16 = port.parse().expect("a port");
                    let (cookie, base) = sign_in(port, &format!("/{path}"));
                    return Web {
                        port,
                        cookie,
                        base,
                        child,
                    };
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("askbus web printed no link");
        }

        /// Opens a tab's WebSocket, signed in.
        pub fn tab(&self) -> Tab {
            let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
            s.set_read_timeout(Some(super::common::RECV_TIMEOUT))
                .unwrap();
            let req = format!(
                "GET {b}ws HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nOrigin: http://127.0.0.1:{p}\r\n\
                 Cookie: {c}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                p = self.port,
                b = self.base,
                c = self.cookie
            );
            s.write_all(req.as_bytes()).unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).expect("the handshake's reply");
                head.push(b[0]);
            }
            let head = String::from_utf8_lossy(&head);
            assert!(head.starts_with("HTTP/1.1 101"), "{head}");
            Tab { s }
        }
    }

    impl Drop for Web {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Follows a sign-in link's two steps as a browser does: the session cookie and the
    /// page's directory.
    fn sign_in(port: u16, link: &str) -> (String, String) {
        let get = |path: &str| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).expect("the reply");
            assert!(text.starts_with("HTTP/1.1 303"), "{path}: {text}");
            text
        };
        let location = |text: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix("location: "))
                .expect("a location")
                .trim()
                .to_owned()
        };
        let first = get(link);
        let next = location(&first);
        let next = next.strip_prefix('.').expect("relative");
        let second = get(next);
        let cookie = second
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .expect("a cookie")
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        (cookie, next[..next.find("login").unwrap()].to_owned())
    }

    pub struct Tab {
        s: TcpStream,
    }

    impl Tab {
        /// The next text message, as JSON (pings are skipped; the server never masks).
        pub fn recv(&mut self) -> Value {
            loop {
                let mut h = [0u8; 2];
                self.s
                    .read_exact(&mut h)
                    .expect("a WebSocket frame in time");
                let len = match h[1] & 0x7f {
                    126 => {
                        let mut l = [0u8; 2];
                        self.s.read_exact(&mut l).unwrap();
                        u16::from_be_bytes(l) as usize
                    }
                    127 => {
                        let mut l = [0u8; 8];
                        self.s.read_exact(&mut l).unwrap();
                        u64::from_be_bytes(l) as usize
                    }
                    n => n as usize,
                };
                let mut payload = vec![0u8; len];
                self.s.read_exact(&mut payload).unwrap();
                match h[0] & 0x0f {
                    1 => return serde_json::from_slice(&payload).expect("JSON text"),
                    8 => panic!("the tab was closed: {payload:?}"),
                    _ => {}
                }
            }
        }

        pub fn recv_type(&mut self, t: &str) -> Value {
            loop {
                let f = self.recv();
                if f["type"] == t {
                    return f;
                }
                assert!(
                    !matches!(f["type"].as_str(), Some("error")),
                    "wanted {t}, got {f}"
                );
            }
        }

        /// Sends a text message (masked, as a browser's are).
        pub fn send(&mut self, v: &Value) {
            let payload = v.to_string().into_bytes();
            let mut frame = vec![0x81u8];
            match payload.len() {
                n @ 0..=125 => frame.push(0x80 | n as u8),
                n @ 126..=65535 => {
                    frame.push(0x80 | 126);
                    frame.extend_from_slice(&(n as u16).to_be_bytes());
                }
                n => {
                    frame.push(0x80 | 127);
                    frame.extend_from_slice(&(n as u64).to_be_bytes());
                }
            }
            let mask = [0x12u8, 0x34, 0x56, 0x78];
            frame.extend_from_slice(&mask);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            self.s.write_all(&frame).unwrap();
        }
    }
}

#[test]
fn askbus_web_on_b_answers_a_question_asked_on_a() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let mut producer = a.connect().await;
        producer
            .send(json!({"type": "hello", "protocol": 1, "client": "agent/1"}))
            .await;
        producer.recv_type("welcome").await;
        producer.send(choice_request("web-1")).await;
        producer.ping().await;
        wait_remote_pending(&b, 1).await;
        let socket = b.socket.clone();
        // The tab blocks on its socket: it runs off the runtime that serves the producer.
        let tab = tokio::task::spawn_blocking(move || {
            let web = web::Web::start(&socket);
            let mut tab = web.tab();
            let shown = tab.recv_type("ask-user-request");
            assert_eq!(shown["correlationId"], "web-1", "{shown}");
            assert_eq!(shown["node"], "A", "{shown}");
            assert_eq!(shown["producer"]["client"], "agent/1", "{shown}");
            tab.send(&answer("web-1", json!({"0": "PostgreSQL"})));
            let ack = tab.recv_type("ask-user-ack");
            assert_eq!(ack["correlationId"], "web-1");
            assert_eq!(ack["outcome"], "answered");
            // A second answer: not-pending, from the origin, as a local UI is told.
            tab.send(&answer("web-1", json!({"0": "SQLite"})));
            let f = tab.recv();
            assert_eq!(
                (f["type"].clone(), f["code"].clone()),
                (json!("error"), json!("not-pending")),
                "{f}"
            );
        });
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "web-1");
        assert_eq!(r["answers"]["0"], "PostgreSQL");
        assert_eq!(r["reason"], "answered");
        tab.await.expect("the tab's side");
        producer.expect_silence(Duration::from_millis(200)).await;
        let rec = a.wait_telemetry(1);
        assert_eq!(rec[0]["ui"]["node"], "B", "{}", rec[0]);
        assert!(
            rec[0]["ui"]["client"]
                .as_str()
                .unwrap()
                .starts_with("askbus-web/"),
            "{}",
            rec[0]
        );
    });
}

#[test]
fn askbus_ui_on_b_answers_a_question_asked_on_a() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let ui = pty::Pty::askbus(&["ui", "--socket", b.socket.to_str().unwrap()]);
        ui.wait_for("● connected").await;
        let mut producer = a.connect().await;
        producer
            .send(json!({"type": "hello", "protocol": 1, "client": "agent/1"}))
            .await;
        producer.recv_type("welcome").await;
        producer.send(choice_request("tty-1")).await;
        let screen = ui.wait_for("Which database?").await;
        assert!(screen.contains("agent/1 (pid "), "{screen}");
        assert!(
            screen.contains(" on A)"),
            "the origin node is shown:\n{screen}"
        );
        let mut ui = ui;
        ui.keys(pty::DOWN);
        ui.wait_for("● 2. PostgreSQL").await;
        ui.keys(pty::ENTER);
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "tty-1");
        assert_eq!(r["answers"]["0"], "PostgreSQL");
        ui.wait_for("✓ Answer delivered to agent/1").await;
        ui.wait_for("No questions pending.").await;
    });
}

/// The golden approval (`client/tool-confirmation-request.json`) under another id, with
/// `context` and any extra fields.
fn approval(id: &str, extra: Value) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples/client/tool-confirmation-request.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["correlationId"] = json!(id);
    v["context"] = json!({"project": "askbus", "agent": "gemini-cli/0.61.0"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn decide(id: &str, outcome: &str) -> Value {
    json!({"type": "tool-confirmation-response", "correlationId": id,
           "confirmed": outcome != "cancel", "outcome": outcome})
}

#[test]
fn approvals_federate_like_questions_and_the_origin_alone_decides() {
    let nats = Nats::start();
    rt().block_on(async {
        let (a, b, c) = three(&nats, "").await;
        let (mut ui_a, _) = a.ui().await;
        let (mut ui_b, _) = b.ui().await;
        let (mut ui_c, _) = c.ui().await;
        let mut producer = a.connect().await;
        producer
            .send(json!({"type": "hello", "protocol": 1, "client": "gemini-cli/0.61.0"}))
            .await;
        producer.recv_type("welcome").await;

        // The reference: decided by a UI on A.
        producer.send(approval("ap-local", json!({}))).await;
        let shown_a = ui_a.recv_type("tool-confirmation-request").await;
        assert_eq!(shown_a["node"], "A", "{shown_a}");
        for ui in [&mut ui_b, &mut ui_c] {
            ui.recv_type("tool-confirmation-request").await;
        }
        ui_a.send(decide("ap-local", "proceed_once")).await;
        let local_ack = ui_a.recv_type("tool-confirmation-ack").await;
        let local = producer.recv_type("tool-confirmation-response").await;
        for ui in [&mut ui_b, &mut ui_c] {
            let w = ui.recv_type("tool-confirmation-withdrawn").await;
            assert_eq!(w["reason"], "answered", "{w}");
            assert_eq!(w["answeredBy"]["node"], "A", "{w}");
        }

        // Asked on A, decided on B: shown everywhere with its node, tool call and context.
        producer.send(approval("ap-1", json!({}))).await;
        ui_a.recv_type("tool-confirmation-request").await;
        let on_b = ui_b.recv_type("tool-confirmation-request").await;
        let on_c = ui_c.recv_type("tool-confirmation-request").await;
        for shown in [&on_b, &on_c] {
            assert_eq!(shown["node"], "A", "{shown}");
            like_golden(shown, "tool-confirmation-request.federated.json");
            assert_eq!(shown["correlationId"], "ap-1");
            for field in ["toolCall", "details", "outcomes", "context"] {
                assert_eq!(shown[field], shown_a[field], "{field}: {shown}");
            }
            assert_eq!(shown["producer"]["client"], "gemini-cli/0.61.0");
        }
        // A question's answer to an approval, and an outcome it does not offer, are refused
        // by the origin as a local UI's would be; the approval stays pending.
        ui_c.send(answer("ap-1", json!({"0": "x"}))).await;
        let wrong = ui_c.recv_type("error").await;
        assert_eq!(wrong["correlationId"], "ap-1", "{wrong}");
        ui_b.send(decide("ap-1", "proceed_always_server")).await;
        let refused = ui_b.recv_type("error").await;
        assert_eq!(refused["correlationId"], "ap-1", "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains("proceed_always_server"),
            "{refused}"
        );
        ui_b.send(decide("ap-1", "proceed_once")).await;
        let ack = ui_b.recv_type("tool-confirmation-ack").await;
        assert_eq!(without_id(&ack), without_id(&local_ack), "{ack}");
        let remote = producer.recv_type("tool-confirmation-response").await;
        assert_eq!(without_id(&remote), without_id(&local), "a remote decision reads as a local one");
        assert_eq!(remote["confirmed"], true);
        for ui in [&mut ui_a, &mut ui_c] {
            let w = ui.recv_type("tool-confirmation-withdrawn").await;
            assert_eq!(w["correlationId"], "ap-1");
            assert_eq!(w["reason"], "answered", "{w}");
            assert_eq!(w["node"], "A", "{w}");
            assert_eq!(w["answeredBy"]["node"], "B", "{w}");
            like_golden(&w, "tool-confirmation-withdrawn.federated.json");
        }
        ui_c.send(decide("ap-1", "cancel")).await;
        ui_c.recv_error("not-pending").await;
        let records = a.wait_telemetry(2);
        let rec = records.iter().find(|r| r["correlationId"] == "ap-1").expect("record");
        assert_eq!(rec["ui"]["node"], "B", "{rec}");

        // Dismissed on C: never an approval.
        producer.send(approval("ap-2", json!({}))).await;
        for ui in [&mut ui_a, &mut ui_b, &mut ui_c] {
            ui.recv_type("tool-confirmation-request").await;
        }
        ui_c.send(json!({"type": "tool-confirmation-response", "correlationId": "ap-2", "dismissed": true}))
            .await;
        let ack = ui_c.recv_type("tool-confirmation-ack").await;
        assert_eq!((ack["reason"].clone(), ack["confirmed"].clone()), (json!("dismissed"), json!(false)));
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!((r["reason"].clone(), r["confirmed"].clone(), r["outcome"].clone()),
            (json!("dismissed"), json!(false), json!("cancel")), "{r}");
        ui_a.recv_type("tool-confirmation-withdrawn").await;
        ui_b.recv_type("tool-confirmation-withdrawn").await;

        // A timeout and a cancel on A withdraw everywhere with the same reason, unconfirmed.
        producer.send(approval("ap-t", json!({"timeoutMs": 300}))).await;
        producer.send(approval("ap-c", json!({}))).await;
        for ui in [&mut ui_b, &mut ui_c] {
            ui.recv_type("tool-confirmation-request").await;
            ui.recv_type("tool-confirmation-request").await;
        }
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!((r["correlationId"].clone(), r["reason"].clone(), r["confirmed"].clone()),
            (json!("ap-t"), json!("timeout"), json!(false)), "{r}");
        producer.send(json!({"type": "tool-confirmation-cancel", "correlationId": "ap-c"})).await;
        let r = producer.recv_type("tool-confirmation-response").await;
        assert_eq!((r["reason"].clone(), r["confirmed"].clone()), (json!("withdrawn"), json!(false)));
        for ui in [&mut ui_b, &mut ui_c] {
            for (id, reason) in [("ap-t", "timeout"), ("ap-c", "withdrawn")] {
                let w = ui.recv_type("tool-confirmation-withdrawn").await;
                assert_eq!((w["correlationId"].clone(), w["reason"].clone()), (json!(id), json!(reason)), "{w}");
            }
        }
        wait_remote_pending(&b, 0).await;
    });
}

#[test]
fn a_ui_filters_by_node_and_askbus_pending_node_lists_one_node_s_questions() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let mut on_a = a.connect().await;
        let mut on_b = b.connect().await;
        on_a.send(choice_request("from-a")).await;
        on_b.send(choice_request("from-b")).await;
        on_a.ping().await;
        on_b.ping().await;
        wait_remote_pending(&b, 1).await;
        // On B: a UI that wants only A's questions, and one that wants only B's own.
        let subscribe = |node: &str| {
            json!({"type": "subscribe", "client": "test-ui/1", "filter": {"node": node}})
        };
        let mut only_a = b.connect().await;
        only_a.send(subscribe("A")).await;
        assert_eq!(only_a.recv_type("subscribed").await["pending"], 1);
        let r = only_a.recv_type("ask-user-request").await;
        assert_eq!((r["correlationId"].clone(), r["node"].clone()), (json!("from-a"), json!("A")));
        let mut only_b = b.connect().await;
        only_b.send(subscribe("B")).await;
        assert_eq!(only_b.recv_type("subscribed").await["pending"], 1);
        let r = only_b.recv_type("ask-user-request").await;
        assert_eq!((r["correlationId"].clone(), r["node"].clone()), (json!("from-b"), json!("B")));
        // Live ones too; and an answer outside the filter is forbidden, the question stays.
        on_a.send(choice_request("from-a-2")).await;
        let r = only_a.recv_type("ask-user-request").await;
        assert_eq!(r["correlationId"], "from-a-2");
        only_b.send(answer("from-a-2", json!({"0": "SQLite"}))).await;
        let err = only_b.recv_error("forbidden").await;
        assert!(err["message"].as_str().unwrap().contains("filter"), "{err}");
        only_a.send(answer("from-a-2", json!({"0": "SQLite"}))).await;
        only_a.recv_type("ask-user-ack").await;
        assert_eq!(on_a.recv_type("ask-user-response").await["correlationId"], "from-a-2");
        only_b.expect_silence(Duration::from_millis(200)).await;
        // A bad node value is refused like any filter value.
        let mut bad = b.connect().await;
        bad.send(json!({"type": "subscribe", "filter": {"node": ""}})).await;
        let err = bad.recv_error("invalid-frame").await;
        assert!(err["message"].as_str().unwrap().contains("filter.node"), "{err}");
        // The CLI's --node.
        let out = b
            .cli()
            .args(["pending", "--json", "--node", "A"])
            .output()
            .expect("askbus pending");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("from-a") && !text.contains("from-b"), "{text}");
    });
}

/// `askbusd --check-config` with `text` as the file and `args`: (ok, stderr).
fn check_config(text: &str, args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("askbusd.toml");
    std::fs::write(
        &path,
        text.replace("{dir}", &dir.path().display().to_string()),
    )
    .unwrap();
    let out = std::process::Command::new(common::daemon_bin())
        .arg("--check-config")
        .arg("--config")
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_validates_the_federation_section_and_its_files() {
    let (ok, err) = check_config(
        "nats = \"nats://127.0.0.1:4222\"\nnode = \"devbox\"\n[federation]\nprefix = \"team_1\"\naccept_nodes = [\"laptop\"]\n",
        &[],
    );
    assert!(ok, "{err}");
    for (text, args, wanted) in [
        (
            "nats = \"nats://x:4222\"\nnode = \"dev box\"\n",
            &[][..],
            "node",
        ),
        (
            "nats = \"nats://x:4222\"\n[federation]\nprefix = \"a.b\"\n",
            &[],
            "prefix",
        ),
        (
            "nats = \"nats://x:4222\"\n[federation]\nshare = \"yes\"\n",
            &[],
            "share",
        ),
        (
            "nats = \"nats://x:4222\"\n[federation]\nbogus = 1\n",
            &[],
            "bogus",
        ),
        (
            "nats = \"nats://x:4222\"\n[federation]\ncreds_file = \"{dir}/missing.creds\"\n",
            &[],
            "missing.creds",
        ),
        (
            "nats = \"nats://x:4222\"\n[federation]\ntls_ca = \"{dir}/missing-ca.pem\"\n",
            &[],
            "missing-ca.pem",
        ),
        (
            "",
            &["--nats", "nats://x:4222", "--node", "a/b"][..],
            "node",
        ),
        // Issue 27 item 14: require_tls turns the transport warnings into errors.
        (
            "nats = \"nats://127.0.0.1:4222\"\n[federation]\nrequire_tls = true\n",
            &[],
            "no NATS authentication",
        ),
        (
            "nats = \"nats://10.1.2.3:4222\"\n[federation]\nrequire_tls = true\ntoken_file = \"/dev/null\"\n",
            &[],
            "in the clear",
        ),
        // The flag does what the key does.
        (
            "[federation]\ntoken_file = \"/dev/null\"\n",
            &["--nats", "nats://10.1.2.3:4222", "--require-tls"][..],
            "in the clear",
        ),
    ] {
        let (ok, err) = check_config(text, args);
        assert!(!ok, "{text:?} {args:?} passed");
        assert!(err.contains(wanted), "{text:?}: {err}");
    }
    // Without it they are warnings; authenticated on loopback (or over TLS) there are none.
    let (ok, err) = check_config("nats = \"nats://10.1.2.3:4222\"\n", &[]);
    assert!(ok, "{err}");
    assert!(
        err.contains("warning: federation: federating with no NATS authentication"),
        "{err}"
    );
    assert!(
        err.contains("nats://10.1.2.3:4222 is not on this machine"),
        "{err}"
    );
    for text in [
        "nats = \"nats://127.0.0.1:4222\"\n[federation]\nrequire_tls = true\ntoken_file = \"/dev/null\"\n",
        "nats = \"tls://10.1.2.3:4222\"\n[federation]\nrequire_tls = true\ntoken_file = \"/dev/null\"\n",
    ] {
        let (ok, err) = check_config(text, &[]);
        assert!(ok, "{text}: {err}");
        assert!(!err.contains("warning"), "{text}: {err}");
    }
}

#[test]
fn sighup_reloads_what_is_shown_and_askbus_stats_shows_the_federation() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let (mut ui_b, _) = b.ui().await;
        let mut producer = a.connect().await;
        producer.send(choice_request("before")).await;
        ui_b.recv_type("ask-user-request").await;
        // B stops accepting A's questions: what is shown stays, new ones are not shown.
        b.write_config("[federation]\naccept_nodes = [\"C\"]\n");
        b.reload();
        producer.send(choice_request("after")).await;
        producer.ping().await;
        ui_b.expect_silence(Duration::from_millis(300)).await;
        assert_eq!(fed_stats(&b).await["remotePending"], 1);
        // And back.
        b.write_config("[federation]\n");
        b.reload();
        producer.send(choice_request("again")).await;
        assert_eq!(
            ui_b.recv_type("ask-user-request").await["correlationId"],
            "again"
        );
        // A connection setting takes a restart, and says so.
        b.write_config("[federation]\nprefix = \"other\"\n");
        b.reload();
        let log = b.log_text();
        assert!(
            log.contains("take a restart") && log.contains("\"federation\""),
            "{log}"
        );

        let out = b.cli().arg("stats").output().expect("askbus stats");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("federation"), "{text}");
        assert!(text.contains("connected"), "{text}");
        assert!(
            text.contains("remotePending") || text.contains("remote"),
            "{text}"
        );
    });
}

/// Lines of a child's pipe, read on a thread, so a test waits for the line it expects.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The first line `wanted` accepts; panics with what was seen if the pipe ends first (the
/// bound only keeps a broken run from hanging CI).
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, wanted: impl Fn(&str) -> bool) -> String {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if wanted(&l) => return l,
            Ok(l) => seen.push(l),
            Err(e) => panic!("{e}: no such line among {seen:#?}"),
        }
    }
}

#[test]
fn askbus_watch_says_the_federation_state_and_names_the_nodes() {
    use std::process::Stdio;
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let mut watch = a
            .cli()
            .arg("watch")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("askbus watch");
        let out = lines_of(watch.stdout.take().unwrap());
        let err = lines_of(watch.stderr.take().unwrap());
        let state = wait_line(&err, |l| l.contains("federation:"));
        // Said once the watcher is registered, so what follows is seen.
        assert!(
            state.starts_with(
                "askbus watch: federation: node A, connected to NATS, 1 other node seen (B), 0 remote \
                 pending"
            ),
            "{state}"
        );

        let (mut ui_b, _) = b.ui().await;
        let mut producer = a.connect().await;
        producer.send(choice_request("watched")).await;
        ui_b.recv_type("ask-user-request").await;
        ui_b.send(answer("watched", json!({"0": "SQLite"}))).await;
        producer.recv_type("ask-user-response").await;
        let answered = wait_line(&out, |l| l.contains("answered") && l.contains("watched"));
        assert!(answered.contains(" on B "), "{answered}");
        let _ = watch.kill();
        let _ = watch.wait();
    });
}

#[test]
fn an_origin_that_shuts_down_withdraws_every_shared_question_everywhere_as_shutdown() {
    // More questions than the federation queue holds operations (8,192): the shutdown's ends
    // travel as one batch, each with its own reason, never a resync's guess.
    const N: usize = 9_000;
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let mut a = node_with_args(&url, "A", &["--max-pending-per-connection", "10000"], "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let (mut ui, _) = b.ui().await;
        let mut producer = a.connect().await;
        for i in 0..N {
            producer.send(choice_request(&format!("s-{i}"))).await;
        }
        let mut shown = std::collections::HashSet::new();
        while shown.len() < N {
            let f = ui.recv_type("ask-user-request").await;
            assert_eq!(f["node"], "A", "{f}");
            assert!(shown.insert(f["correlationId"].as_str().unwrap().to_owned()));
        }
        let (status, _) = a.terminate(Duration::from_secs(60));
        assert!(status.success(), "{status}");
        let mut withdrawn = std::collections::HashSet::new();
        while withdrawn.len() < N {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(w["reason"], "shutdown", "{w}");
            let id = w["correlationId"].as_str().unwrap().to_owned();
            assert!(shown.contains(&id), "{w}");
            assert!(withdrawn.insert(id), "withdrawn twice: {w}");
        }
        wait_remote_pending(&b, 0).await;
        drop(producer);
    });
}

/// "No UI" counts this node's UIs only (issue 31): with a UI open on B alone, a hook on A hands
/// the call straight back to the agent's prompt (nobody may be looking at B's screen), while
/// `askbus ask` on A's terminal says that B's UIs show its question rather than "no UI".
#[test]
fn a_ui_on_another_node_leaves_the_hook_to_hand_back_and_ask_names_that_node() {
    let nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let (_ui_on_b, _) = b.ui().await;

        let input = json!({"session_id": "s1", "transcript_path": "/h/s.jsonl", "cwd": "/tmp",
                           "permission_mode": "default", "hook_event_name": "PreToolUse",
                           "tool_name": "Bash", "tool_input": {"command": "ls"}})
        .to_string();
        let mut hook = a.cli();
        hook.args(["hook", "claude"]).env_remove("CI");
        let child = common::spawn_with_stdin(&mut hook, &input);
        let started = std::time::Instant::now();
        let out = tokio::task::block_in_place(|| child.wait_with_output()).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the hook waited for B's UI"
        );
        assert_eq!(out.status.code(), Some(0));
        let decided: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(decided["hookSpecificOutput"]["permissionDecision"], "ask");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.json");
        std::fs::write(
            &file,
            r#"{"questions":[{"question":"Ship it?","header":"Ship","type":"yesno"}]}"#,
        )
        .unwrap();
        let sock = a.socket.to_str().unwrap().to_owned();
        // Wide enough that the line does not wrap.
        let mut ask =
            pty::Pty::askbus_sized(&["--socket", &sock, "ask", file.to_str().unwrap()], 24, 240);
        let screen = ask.wait_for("(B)").await;
        assert!(
            screen.contains("other federated node (B) show it too"),
            "{screen}"
        );
        ask.keys("\x03");
        ask.wait_exit().await;
    });
}

/// The NATS server's monitoring endpoint `path` (`-m PORT`), as JSON.
fn monitor(port: u16, path: &str) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("monitoring port");
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn forty_eight_nodes_form_answer_and_withdraw_with_linear_subscriptions() {
    // Issue 30's scale test, on one stock server: 48 nodes (one socket dir each) find each
    // other, a question on node 1 shows on node 48, is answered there and withdrawn
    // everywhere, and the server holds at most 5 subscriptions per node (answers, sync,
    // hello replies, request inbox, shares), none per pair. How long formation took is
    // printed (a figure, not an assertion: timings belong to the benches).
    const N: usize = 48;
    let mport = common::nats::free_port();
    let nats = Nats::start_with(&["-m", &mport.to_string()], None);
    let base = monitor(mport, "/subsz")["num_subscriptions"]
        .as_u64()
        .unwrap();
    rt().block_on(async {
        let url = nats.url();
        let names: Vec<String> = (1..=N).map(|i| format!("n{i}")).collect();
        let nodes: Vec<Daemon> = names.iter().map(|n| node(&url, n, "")).collect();
        let started = std::time::Instant::now();
        for (i, d) in nodes.iter().enumerate() {
            let others: Vec<&str> = names
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, n)| n.as_str())
                .collect();
            wait_sees(d, &others).await;
        }
        eprintln!(
            "{N} nodes formed {} ms after the last one started",
            started.elapsed().as_millis()
        );
        let subs = monitor(mport, "/subsz")["num_subscriptions"]
            .as_u64()
            .unwrap()
            - base;
        eprintln!("{N} nodes: {subs} server subscriptions ({base} before they started)");
        assert!(
            (4 * N as u64..=5 * N as u64).contains(&subs),
            "{subs} subscriptions for {N} nodes"
        );
        let conns = monitor(mport, "/connz?subs=1");
        for c in conns["connections"].as_array().unwrap() {
            let n = c["subscriptions_list"].as_array().map_or(0, Vec::len);
            assert!(n <= 5, "{c}");
        }

        let (mut ui_48, _) = nodes[N - 1].ui().await;
        let (mut ui_2, _) = nodes[1].ui().await;
        let (mut ui_24, _) = nodes[23].ui().await;
        let mut producer = nodes[0].connect().await;
        producer.send(choice_request("scale-1")).await;
        let shown = ui_48.recv_type("ask-user-request").await;
        assert_eq!(shown["node"], "n1", "{shown}");
        ui_2.recv_type("ask-user-request").await;
        ui_24.recv_type("ask-user-request").await;
        ui_48.send(answer("scale-1", json!({"0": "SQLite"}))).await;
        ui_48.recv_type("ask-user-ack").await;
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["answers"]["0"], "SQLite", "{r}");
        for ui in [&mut ui_2, &mut ui_24] {
            let w = ui.recv_type("ask-user-withdrawn").await;
            assert_eq!(w["answeredBy"]["node"], "n48", "{w}");
        }
        for d in &nodes[1..] {
            wait_remote_pending(d, 0).await;
        }
        // Still linear after a question went round: the beats and the answer add none.
        let after = monitor(mport, "/subsz")["num_subscriptions"]
            .as_u64()
            .unwrap()
            - base;
        assert!(after <= 5 * N as u64, "{after}");
    });
}

/// An unreachable NATS server is logged once per retry with its URL and the OS's reason,
/// not as the client library's bare "nats: IO error" events (issue 31 item 6).
#[test]
fn an_unreachable_nats_server_is_logged_with_its_url_and_the_os_error() {
    let port = common::nats::free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let d = Daemon::start_with(&["--nats", &url, "--node", "lonely"]);
    let want = format!("cannot reach NATS at {url}: Connection refused");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !d.log_text().contains(&want) {
        assert!(
            std::time::Instant::now() < deadline,
            "never logged {want:?}: {}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = d.log_text();
    // The library's own event lines are off (its debug events stay in a debug log).
    assert!(!log.contains(" event: client error"), "{log}");
}
