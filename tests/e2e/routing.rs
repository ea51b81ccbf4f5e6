//! Routing behaviour of the real daemon: broadcast, first answer wins, replay, timeouts,
//! the no-UI policy, cancel, producer loss, half-closed connections, duplicates and invalid
//! answers.

use crate::harness as common;

use std::time::Duration;

use common::{answer, choice_request, request_with, Daemon};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_to_three_uis_first_answer_wins() {
    let d = Daemon::start();
    let (mut ui1, _) = d.ui().await;
    let (mut ui2, _) = d.ui().await;
    let (mut ui3, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer
        .send(json!({"type": "hello", "protocol": 1, "client": "agent/2.0"}))
        .await;
    producer.recv_type("welcome").await;
    let mut req = choice_request("q1");
    // Literal escapes are normalized before the UIs see them.
    req["questions"][0]["question"] = json!("Which\\ndatabase?");
    producer.send(req).await;
    for ui in [&mut ui1, &mut ui2, &mut ui3] {
        let got = ui.recv_type("ask-user-request").await;
        assert_eq!(got["correlationId"], "q1");
        assert_eq!(got["questions"][0]["question"], "Which\ndatabase?");
        assert_eq!(got["producer"]["client"], "agent/2.0");
        assert_eq!(got["producer"]["pid"], std::process::id());
        assert!(got["producer"]["uid"].is_u64());
        let left = got["timeoutMs"].as_u64().unwrap();
        assert!(left <= 600_000 && left > 590_000, "{left}");
    }
    ui2.send(answer("q1", json!({"0": "PostgreSQL"}))).await;
    let ack = ui2.recv_type("ask-user-ack").await;
    assert_eq!(
        ack,
        json!({"type": "ask-user-ack", "correlationId": "q1", "outcome": "answered"})
    );
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["correlationId"], "q1");
    assert_eq!(resp["reason"], "answered");
    assert_eq!(resp["cancelled"], false);
    assert_eq!(resp["answers"], json!({"0": "PostgreSQL"}));
    assert_eq!(
        resp["result"]["llmContent"],
        r#"{"answers":{"0":"PostgreSQL"}}"#
    );
    assert_eq!(
        resp["result"]["returnDisplay"],
        "**User answered:**\n  Database → PostgreSQL"
    );
    for ui in [&mut ui1, &mut ui3] {
        let w = ui.recv_type("ask-user-withdrawn").await;
        assert_eq!(
            w,
            json!({"type": "ask-user-withdrawn", "correlationId": "q1", "reason": "answered"})
        );
    }
    // A later answer loses, and the producer hears nothing more.
    ui1.send(answer("q1", json!({"0": "SQLite"}))).await;
    let e = ui1.recv_error("not-pending").await;
    assert_eq!(e["correlationId"], "q1");
    producer.expect_silence(Duration::from_millis(200)).await;
    ui2.expect_silence(Duration::from_millis(50)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_subscriber_gets_replay_in_order_then_live() {
    let d = Daemon::start();
    let mut producer = d.connect().await;
    for i in 0..5 {
        producer.send(choice_request(&format!("r{i}"))).await;
    }
    producer.ping().await;
    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, 5);
    for i in 0..5 {
        let r = ui.recv_type("ask-user-request").await;
        assert_eq!(r["correlationId"], format!("r{i}"));
    }
    producer.send(choice_request("live")).await;
    assert_eq!(
        ui.recv_type("ask-user-request").await["correlationId"],
        "live"
    );
    // Resolved requests are not replayed to the next subscriber.
    ui.send(answer("r2", json!({"0": "SQLite"}))).await;
    ui.recv_type("ask-user-ack").await;
    let (mut ui2, pending) = d.ui().await;
    assert_eq!(pending, 5);
    let ids: Vec<_> = futures_ids(&mut ui2, 5).await;
    assert_eq!(ids, ["r0", "r1", "r3", "r4", "live"]);
}

async fn futures_ids(ui: &mut common::Raw, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let r = ui.recv_type("ask-user-request").await;
        ids.push(r["correlationId"].as_str().unwrap().to_owned());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_many_pending_is_complete_and_ordered() {
    // More than one replay step (64 per step) and with live traffic while it runs.
    let d = Daemon::start_with(&["--max-pending-per-connection", "1000"]);
    let mut producer = d.connect().await;
    for i in 0..300 {
        producer.send(choice_request(&format!("p{i:03}"))).await;
    }
    producer.ping().await;
    let mut ui = d.connect().await;
    ui.send(json!({"type": "subscribe"})).await;
    for i in 300..310 {
        producer.send(choice_request(&format!("p{i:03}"))).await;
    }
    producer
        .send(json!({"type": "ask-user-cancel", "correlationId": "p000"}))
        .await;
    // The subscription races the live requests: it may see some of them as pending.
    let sub = ui.recv_type("subscribed").await;
    let pending = sub["pending"].as_u64().unwrap();
    assert!((299..=310).contains(&pending), "{sub}");
    let mut seen = Vec::new();
    let mut withdrawn = Vec::new();
    let live_ids: Vec<String> = (1..310).map(|i| format!("p{i:03}")).collect();
    while !live_ids.iter().all(|id| seen.contains(id)) {
        let f = ui.recv().await;
        let id = f["correlationId"].as_str().unwrap().to_owned();
        match f["type"].as_str().unwrap() {
            "ask-user-request" => seen.push(id),
            "ask-user-withdrawn" => withdrawn.push(id),
            other => panic!("unexpected {other}"),
        }
    }
    if seen.contains(&"p000".to_owned()) && !withdrawn.contains(&"p000".to_owned()) {
        let w = ui.recv_type("ask-user-withdrawn").await;
        withdrawn.push(w["correlationId"].as_str().unwrap().to_owned());
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "replay then live must stay in arrival order");
    let unique: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no request twice");
    // p000 was cancelled: either never sent, or sent and then withdrawn.
    assert_eq!(
        seen.contains(&"p000".to_owned()),
        withdrawn.contains(&"p000".to_owned())
    );
    ui.expect_silence(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_leaving_changes_nothing_for_pending() {
    let d = Daemon::start();
    let mut producer = d.connect().await;
    let (mut ui1, _) = d.ui().await;
    producer.send(choice_request("stay")).await;
    ui1.recv_type("ask-user-request").await;
    drop(ui1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    producer.expect_silence(Duration::from_millis(100)).await;
    let (mut ui2, pending) = d.ui().await;
    assert_eq!(pending, 1);
    assert_eq!(
        ui2.recv_type("ask-user-request").await["correlationId"],
        "stay"
    );
    ui2.send(answer("stay", json!({"0": "SQLite"}))).await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["reason"],
        "answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_reaches_producer_and_uis() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    let started = std::time::Instant::now();
    producer
        .send(request_with("t", json!({"timeoutMs": 300})))
        .await;
    let r = ui.recv_type("ask-user-request").await;
    assert!(r["timeoutMs"].as_u64().unwrap() <= 300);
    let resp = producer.recv_type("ask-user-response").await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(290), "{took:?}");
    assert_eq!(resp["reason"], "timeout");
    assert_eq!(resp["cancelled"], true);
    assert_eq!(resp["answers"], json!({}));
    assert_eq!(
        resp["result"]["llmContent"],
        "User did not answer the ask_user dialog within 0.3 seconds."
    );
    assert_eq!(resp["result"]["data"]["ask_user"]["reason"], "timeout");
    assert_eq!(resp["result"]["data"]["ask_user"]["dismissed"], true);
    let w = ui.recv_type("ask-user-withdrawn").await;
    assert_eq!(w["reason"], "timeout");
    // Answering after the timeout is too late.
    ui.send(answer("t", json!({"0": "SQLite"}))).await;
    ui.recv_error("not-pending").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_clamped_and_defaulted() {
    let d = Daemon::start_with(&["--max-timeout-ms", "400", "--default-timeout-ms", "200"]);
    let mut welcome = d.connect().await;
    welcome.send(json!({"type": "hello", "protocol": 1})).await;
    let w = welcome.recv_type("welcome").await;
    assert_eq!(w["maxTimeoutMs"], 400);
    assert_eq!(w["defaultTimeoutMs"], 200);
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer
        .send(request_with(
            "huge",
            json!({"timeoutMs": 99_999_999_999u64}),
        ))
        .await;
    producer.send(choice_request("default")).await;
    let huge = ui.recv_type("ask-user-request").await;
    assert!(huge["timeoutMs"].as_u64().unwrap() <= 400, "{huge}");
    let default = ui.recv_type("ask-user-request").await;
    assert!(default["timeoutMs"].as_u64().unwrap() <= 200, "{default}");
    let first = producer.recv_type("ask-user-response").await;
    assert_eq!(first["correlationId"], "default");
    assert_eq!(first["reason"], "timeout");
    let second = producer.recv_type("ask-user-response").await;
    assert_eq!(second["correlationId"], "huge");
    assert_eq!(
        second["result"]["llmContent"],
        "User did not answer the ask_user dialog within 0.4 seconds."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ui_reject_and_wait() {
    let d = Daemon::start();
    let mut producer = d.connect().await;
    producer
        .send(request_with("rej", json!({"noUi": "reject"})))
        .await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["reason"], "no-ui");
    assert_eq!(resp["cancelled"], true);
    assert_eq!(
        resp["result"]["llmContent"],
        "No user interface is connected to answer ask_user questions; continue without asking."
    );
    // The default (wait) keeps it until a UI comes.
    producer.send(choice_request("wait")).await;
    producer.expect_silence(Duration::from_millis(200)).await;
    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, 1);
    ui.recv_type("ask-user-request").await;
    // With a UI present, reject does not apply.
    producer
        .send(request_with("rej2", json!({"noUi": "reject"})))
        .await;
    assert_eq!(
        ui.recv_type("ask-user-request").await["correlationId"],
        "rej2"
    );
    ui.send(answer("wait", json!({"0": "SQLite"}))).await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["correlationId"],
        "wait"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_wide_no_ui_reject_and_override() {
    let d = Daemon::start_with(&["--no-ui", "reject"]);
    let mut producer = d.connect().await;
    producer.send(choice_request("a")).await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["reason"],
        "no-ui"
    );
    producer
        .send(request_with("b", json!({"noUi": "wait"})))
        .await;
    producer.expect_silence(Duration::from_millis(200)).await;
    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, 1);
    ui.recv_type("ask-user-request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_withdraws_only_own_questions() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    let mut other = d.connect().await;
    producer.send(choice_request("c1")).await;
    ui.recv_type("ask-user-request").await;
    other
        .send(json!({"type": "ask-user-cancel", "correlationId": "c1"}))
        .await;
    assert_eq!(other.recv_error("not-pending").await["correlationId"], "c1");
    producer
        .send(json!({"type": "ask-user-cancel", "correlationId": "c1"}))
        .await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["reason"], "withdrawn");
    assert_eq!(resp["cancelled"], true);
    assert_eq!(resp["result"]["data"]["ask_user"]["reason"], "withdrawn");
    assert_eq!(
        ui.recv_type("ask-user-withdrawn").await["reason"],
        "withdrawn"
    );
    producer
        .send(json!({"type": "ask-user-cancel", "correlationId": "c1"}))
        .await;
    producer.recv_error("not-pending").await;
    producer.send(json!({"type": "ask-user-cancel"})).await;
    producer.recv_error("invalid-request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_gone_withdraws_its_requests() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    let mut survivor = d.connect().await;
    producer.send(choice_request("g1")).await;
    producer.send(choice_request("g2")).await;
    survivor.send(choice_request("s1")).await;
    for _ in 0..3 {
        ui.recv_type("ask-user-request").await;
    }
    drop(producer);
    let w1 = ui.recv_type("ask-user-withdrawn").await;
    let w2 = ui.recv_type("ask-user-withdrawn").await;
    assert_eq!(
        (w1["correlationId"].as_str(), w1["reason"].as_str()),
        (Some("g1"), Some("producer-gone"))
    );
    assert_eq!(
        (w2["correlationId"].as_str(), w2["reason"].as_str()),
        (Some("g2"), Some("producer-gone"))
    );
    ui.send(answer("g1", json!({"0": "SQLite"}))).await;
    ui.recv_error("not-pending").await;
    ui.send(answer("s1", json!({"0": "SQLite"}))).await;
    assert_eq!(
        survivor.recv_type("ask-user-response").await["reason"],
        "answered"
    );
    let records = d.wait_telemetry(3);
    let gone: Vec<_> = records
        .iter()
        .filter(|r| r["reason"] == "producer-gone")
        .collect();
    assert_eq!(gone.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_correlation_id_leaves_first_untouched() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p1 = d.connect().await;
    let mut p2 = d.connect().await;
    p1.send(choice_request("dup")).await;
    ui.recv_type("ask-user-request").await;
    p1.send(choice_request("dup")).await;
    assert_eq!(
        p1.recv_error("duplicate-correlation-id").await["correlationId"],
        "dup"
    );
    p2.send(choice_request("dup")).await;
    p2.recv_error("duplicate-correlation-id").await;
    ui.expect_silence(Duration::from_millis(100)).await;
    ui.send(answer("dup", json!({"0": "SQLite"}))).await;
    let resp = p1.recv_type("ask-user-response").await;
    assert_eq!(resp["answers"]["0"], "SQLite");
    // Once resolved, the id may be used again, by anyone.
    p2.send(choice_request("dup")).await;
    assert_eq!(ui.recv_type("ask-user-ack").await["correlationId"], "dup");
    assert_eq!(
        ui.recv_type("ask-user-request").await["correlationId"],
        "dup"
    );
    ui.send(answer("dup", json!({"0": "PostgreSQL"}))).await;
    assert_eq!(
        p2.recv_type("ask-user-response").await["answers"]["0"],
        "PostgreSQL"
    );
    p1.expect_silence(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_answers_leave_the_request_pending() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer.send(choice_request("inv")).await;
    ui.recv_type("ask-user-request").await;
    let bad = [
        json!({"type": "ask-user-response", "correlationId": "inv", "answers": {"1": "x"}}),
        json!({"type": "ask-user-response", "correlationId": "inv", "answers": {"0": 5}}),
        json!({"type": "ask-user-response", "correlationId": "inv", "answers": {"zero": "x"}}),
        json!({"type": "ask-user-response", "correlationId": "inv", "answers": ["x"]}),
        json!({"type": "ask-user-response", "correlationId": "inv"}),
        json!({"type": "ask-user-response", "correlationId": "inv", "answers": {}, "cancelled": 1}),
        json!({"type": "ask-user-response", "answers": {"0": "x"}}),
    ];
    for frame in bad {
        ui.send(frame.clone()).await;
        let e = ui.recv_error("invalid-response").await;
        if frame.get("correlationId").is_some() {
            assert_eq!(e["correlationId"], "inv", "{frame}");
        }
    }
    // Answers whose result would explode (each line indented by a huge header) are refused
    // before anything is built.
    let mut huge = choice_request("boom");
    huge["questions"][0]["header"] = json!("H".repeat(300_000));
    huge["questions"][0]["type"] = json!("text");
    producer.send(huge).await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("boom", json!({"0": "\n".repeat(300_000)})))
        .await;
    let e = ui.recv_error("invalid-response").await;
    assert!(e["message"].as_str().unwrap().contains("limit"), "{e}");
    ui.send(answer("boom", json!({"0": "fine"}))).await;
    ui.recv_type("ask-user-ack").await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["correlationId"],
        "boom"
    );
    // A connection that never subscribed may not answer.
    let mut stranger = d.connect().await;
    stranger.send(answer("inv", json!({"0": "SQLite"}))).await;
    stranger.recv_error("not-subscribed").await;
    producer.expect_silence(Duration::from_millis(100)).await;
    ui.send(answer("inv", json!({"0": "SQLite"}))).await;
    ui.recv_type("ask-user-ack").await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["reason"],
        "answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dismissal_and_empty_submission() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer.send(choice_request("d")).await;
    producer.send(choice_request("e")).await;
    ui.recv_type("ask-user-request").await;
    ui.recv_type("ask-user-request").await;
    ui.send(json!({"type": "ask-user-response", "correlationId": "d", "answers": {}, "cancelled": true}))
        .await;
    assert_eq!(ui.recv_type("ask-user-ack").await["outcome"], "dismissed");
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["reason"], "dismissed");
    assert_eq!(resp["cancelled"], true);
    assert_eq!(
        resp["result"]["llmContent"],
        "User dismissed ask_user dialog without answering."
    );
    assert_eq!(resp["result"]["returnDisplay"], "User dismissed dialog");
    assert_eq!(
        resp["result"]["data"],
        json!({"ask_user": {"question_types": ["choice"], "dismissed": true}})
    );
    ui.send(answer("e", json!({}))).await;
    ui.recv_type("ask-user-ack").await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["reason"], "answered");
    assert_eq!(
        resp["result"]["returnDisplay"],
        "User submitted without answering questions."
    );
    assert_eq!(resp["result"]["data"]["ask_user"]["empty_submission"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_see_every_event_without_question_text() {
    let d = Daemon::start();
    let mut watch = d.connect().await;
    watch
        .send(json!({"type": "watch", "client": "ops/1"}))
        .await;
    watch.recv_type("watching").await;
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer.send(choice_request("w1")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("w1", json!({"0": "SQLite"}))).await;
    producer.recv_type("ask-user-response").await;
    producer
        .send(json!({"type": "ask-user-request", "correlationId": "bad", "questions": []}))
        .await;
    producer.recv_error("invalid-request").await;
    let req = watch.recv_type("bus-event").await;
    assert_eq!(req["event"], "request");
    assert_eq!(req["correlationId"], "w1");
    assert_eq!(req["headers"], json!(["Database"]));
    assert_eq!(req["questionTypes"], json!(["choice"]));
    assert!(req["timeoutMs"].is_u64());
    let done = watch.recv_type("bus-event").await;
    assert_eq!(done["event"], "answered");
    assert_eq!(done["ui"]["client"], "test-ui/1");
    assert!(done["latencyMs"].is_u64());
    let rejected = watch.recv_type("bus-event").await;
    assert_eq!(rejected["event"], "rejected");
    assert_eq!(rejected["code"], "invalid-request");
    let text = format!("{req}{done}");
    assert!(
        !text.contains("Which database?") && !text.contains("SQLite"),
        "{text}"
    );
    // A watcher is not a UI: it is not sent questions and cannot answer.
    producer.send(choice_request("w2")).await;
    assert_eq!(watch.recv_type("bus-event").await["event"], "request");
    watch.send(answer("w2", json!({"0": "SQLite"}))).await;
    watch.recv_error("not-subscribed").await;
}

/// A one-shot producer (`nc -N`, `socat`) shuts its write side after its request: that is not
/// a disconnect. Its question stays pending, and the response is written to the side it still
/// reads; the daemon then closes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_that_half_closes_still_gets_its_answer() {
    let d = Daemon::start();
    // Without a UI, the only end is the timeout: a half-close that withdrew the question
    // would close the connection with no response at all.
    let mut producer = d.connect().await;
    producer
        .send(request_with("h0", json!({"timeoutMs": 300})))
        .await;
    producer.shutdown_write().await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(
        (resp["correlationId"].as_str(), resp["reason"].as_str()),
        (Some("h0"), Some("timeout"))
    );
    producer.expect_closed().await;

    // Answered by a UI: two questions, the connection stays open until both are answered.
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer.send(choice_request("h1")).await;
    producer.send(choice_request("h2")).await;
    producer.shutdown_write().await;
    ui.recv_type("ask-user-request").await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("h1", json!({"0": "SQLite"}))).await;
    ui.recv_type("ask-user-ack").await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["correlationId"], "h1");
    assert_eq!(resp["answers"], json!({"0": "SQLite"}));
    ui.send(answer("h2", json!({"0": "PostgreSQL"}))).await;
    ui.recv_type("ask-user-ack").await;
    let resp = producer.recv_type("ask-user-response").await;
    assert_eq!(resp["correlationId"], "h2");
    assert_eq!(resp["reason"], "answered");
    producer.expect_closed().await;
    let records = d.wait_telemetry(3);
    assert!(
        records.iter().all(|r| r["reason"] != "producer-gone"),
        "{records:?}"
    );
}

/// Only a full close withdraws: a half-closed producer that then closes its end entirely
/// (or is killed) has its questions withdrawn as `producer-gone`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_producer_that_closes_entirely_withdraws_its_question() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    producer.send(choice_request("hc")).await;
    producer.shutdown_write().await;
    ui.recv_type("ask-user-request").await;
    // Still pending after the half-close: another UI is replayed it.
    let (mut late, pending) = d.ui().await;
    assert_eq!(pending, 1);
    late.recv_type("ask-user-request").await;
    drop(producer);
    let w = ui.recv_type("ask-user-withdrawn").await;
    assert_eq!(
        (w["correlationId"].as_str(), w["reason"].as_str()),
        (Some("hc"), Some("producer-gone"))
    );
    assert_eq!(d.wait_telemetry(1)[0]["reason"], "producer-gone");
}

/// A UI that shuts its write side can no longer answer: it stops being a UI, and having
/// nothing else to receive, is closed. A watcher that does keeps its events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_ui_is_closed_and_a_half_closed_watcher_keeps_watching() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    ui.shutdown_write().await;
    ui.expect_closed().await;

    let mut watch = d.connect().await;
    watch.send(json!({"type": "watch"})).await;
    watch.recv_type("watching").await;
    watch.shutdown_write().await;
    let mut producer = d.connect().await;
    producer
        .send(request_with("hw", json!({"timeoutMs": 200})))
        .await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["reason"],
        "timeout"
    );
    let ev = watch.recv_type("bus-event").await;
    assert_eq!(
        (ev["event"].as_str(), ev["correlationId"].as_str()),
        (Some("request"), Some("hw"))
    );
    let ev = watch.recv_type("bus-event").await;
    assert_eq!(ev["event"], "timeout");
}
