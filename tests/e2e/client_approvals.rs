//! The Rust client's approval API through the real daemon: a producer's `confirm` (allow,
//! allow always, deny with a reason, dismissal, timeout, cancel, a refused request, a daemon
//! killed or stopped: only a person's approval is `confirmed`) and a UI's `decide`, both
//! checked against the golden frames of `proto/examples`.

use crate::harness as common;

use std::path::PathBuf;
use std::time::Duration;

use askbusd::client::{
    Backoff, Confirm, ConfirmationReason, Producer, ProducerOptions, Ui, UiEvent, UiSubscription,
    Update,
};
use askbusd::protocol::{encode, Decision, Outcome, ServerFrame, ToolOutcome};
use common::Daemon;
use serde_json::{json, Value};

fn example(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

const GOLDEN_ID: &str = "b1f4c2d8-6a3e-4f0b-9c27-5d8e1a7f3b64";

/// The golden request (`client/tool-confirmation-request.json`) as a [`Confirm`].
fn golden_confirm() -> Confirm {
    let v = example("client/tool-confirmation-request.json");
    Confirm {
        tool_call: v["toolCall"].clone(),
        details: Some(v["details"].clone()),
        outcomes: Some(serde_json::from_value(v["outcomes"].clone()).unwrap()),
        correlation_id: Some(v["correlationId"].as_str().unwrap().to_owned()),
        timeout_ms: v["timeoutMs"].as_u64(),
        ..Confirm::default()
    }
}

/// The JSON of what a UI event carries, as the daemon sent it.
fn frame_of(event: UiEvent) -> Value {
    let frame = match event {
        UiEvent::Approval(a) => ServerFrame::ToolConfirmationRequest(*a),
        UiEvent::ApprovalAck(a) => ServerFrame::ToolConfirmationAck(a),
        UiEvent::Error(e) => ServerFrame::Error(e),
        other => panic!("not an approval event: {other:?}"),
    };
    serde_json::to_value(&frame).unwrap()
}

fn without(mut v: Value, keys: &[&str]) -> Value {
    for k in keys {
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

async fn ui(d: &Daemon) -> Ui {
    Ui::subscribe(&d.socket, Some("test-ui/1")).await.unwrap()
}

/// The next approval the UI is shown.
async fn next_approval(ui: &mut Ui) -> Box<askbusd::protocol::UiApproval> {
    loop {
        match ui.next().await.unwrap() {
            Some(UiEvent::Approval(a)) => return a,
            Some(_) => continue,
            None => panic!("askbusd closed the UI connection"),
        }
    }
}

async fn next_ack(ui: &mut Ui) -> UiEvent {
    loop {
        match ui.next().await.unwrap() {
            Some(e @ (UiEvent::ApprovalAck(_) | UiEvent::Error(_))) => return e,
            Some(_) => continue,
            None => panic!("askbusd closed the UI connection"),
        }
    }
}

#[test]
fn decisions_encode_as_the_golden_ui_frames() {
    let id = GOLDEN_ID;
    let cases = [
        (
            Decision::allow_once(),
            "client/tool-confirmation-response.json",
        ),
        (
            Decision::allow(ToolOutcome::ProceedAlways),
            "client/tool-confirmation-response.always.json",
        ),
        (
            Decision::deny(Some(
                "Not the build directory: run cargo clean instead.".into(),
            )),
            "client/tool-confirmation-response.deny.json",
        ),
        (
            Decision::Dismissed,
            "client/tool-confirmation-response.dismissed.json",
        ),
    ];
    for (decision, file) in cases {
        let sent: Value = serde_json::from_slice(&encode(&decision.frame(id))).unwrap();
        assert_eq!(sent, example(file), "{file}");
    }
    assert!(Decision::allow_once().confirms());
    assert!(!Decision::deny(None).confirms());
    assert!(!Decision::Dismissed.confirms());
    // An empty reason is no reason.
    assert_eq!(Decision::deny(Some(String::new())), Decision::deny(None));
    let modify: Value =
        serde_json::from_slice(&encode(&Decision::modify("new".into()).frame("m"))).unwrap();
    assert_eq!(
        modify,
        json!({"type": "tool-confirmation-response", "correlationId": "m", "confirmed": true,
               "outcome": "modify_with_editor", "payload": {"newContent": "new"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_once_is_confirmed_and_the_ui_sees_the_golden_frames() {
    let d = Daemon::start();
    let mut ui = ui(&d).await;
    let p = Producer::connect(&d.socket, Some("my-agent/1.2.0"))
        .await
        .unwrap();
    let asked = tokio::spawn(async move { p.confirm(golden_confirm()).await });
    let a = next_approval(&mut ui).await;
    let variable = ["timeoutMs", "producer"];
    let shown = frame_of(UiEvent::Approval(a.clone()));
    assert_eq!(
        without(shown, &variable),
        without(example("server/tool-confirmation-request.json"), &variable)
    );
    assert_eq!(
        a.outcomes,
        [
            ToolOutcome::ProceedOnce,
            ToolOutcome::ProceedAlways,
            ToolOutcome::Cancel
        ]
    );
    ui.decide(&a.correlation_id, &Decision::allow_once())
        .await
        .unwrap();
    assert_eq!(
        frame_of(next_ack(&mut ui).await),
        example("server/tool-confirmation-ack.json")
    );
    let c = asked.await.unwrap();
    assert!(c.confirmed);
    assert!(c.decided());
    assert_eq!(c.outcome, ToolOutcome::ProceedOnce);
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Answered));
    assert_eq!(c.message, None);
    assert_eq!(c.correlation_id, GOLDEN_ID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_and_deny_with_a_reason_reach_the_producer() {
    let d = Daemon::start();
    let mut ui = ui(&d).await;
    let p = std::sync::Arc::new(Producer::connect(&d.socket, None).await.unwrap());

    let p1 = p.clone();
    let asked = tokio::spawn(async move { p1.confirm(golden_confirm()).await });
    let a = next_approval(&mut ui).await;
    ui.decide(
        &a.correlation_id,
        &Decision::allow(ToolOutcome::ProceedAlways),
    )
    .await
    .unwrap();
    let c = asked.await.unwrap();
    assert!(c.confirmed);
    assert_eq!(c.outcome, ToolOutcome::ProceedAlways);

    let p2 = p.clone();
    let asked = tokio::spawn(async move { p2.confirm(golden_confirm()).await });
    let a = next_approval(&mut ui).await;
    let reason = "Not the build directory: run cargo clean instead.";
    ui.decide(&a.correlation_id, &Decision::deny(Some(reason.into())))
        .await
        .unwrap();
    let c = asked.await.unwrap();
    let golden = example("server/tool-confirmation-response.denied.json");
    assert!(!c.confirmed);
    assert!(c.decided());
    assert_eq!(c.outcome, ToolOutcome::Cancel);
    assert_eq!(c.message.as_deref(), golden["message"].as_str());
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Answered));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_the_request_does_not_offer_is_refused_and_it_stays_pending() {
    let d = Daemon::start();
    let mut ui = ui(&d).await;
    let p = Producer::connect(&d.socket, None).await.unwrap();
    let asked = tokio::spawn(async move { p.confirm(Confirm::exec("cargo build")).await });
    let a = next_approval(&mut ui).await;
    assert_eq!(a.outcomes, ToolOutcome::MINIMAL);
    ui.decide(
        &a.correlation_id,
        &Decision::allow(ToolOutcome::ProceedAlways),
    )
    .await
    .unwrap();
    let UiEvent::Error(e) = next_ack(&mut ui).await else {
        panic!("an outcome not offered was taken")
    };
    assert_eq!(e.code, "invalid-response");
    assert!(!asked.is_finished());
    ui.decide(&a.correlation_id, &Decision::Dismissed)
        .await
        .unwrap();
    assert_eq!(
        frame_of(next_ack(&mut ui).await)["reason"],
        json!("dismissed")
    );
    let c = asked.await.unwrap();
    let golden = example("server/tool-confirmation-response.dismissed.json");
    assert!(!c.confirmed);
    assert!(!c.decided());
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Dismissed));
    assert_eq!(c.message.as_deref(), golden["message"].as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_a_cancel_no_ui_and_a_refusal_are_never_approvals() {
    let d = Daemon::start();
    let p = std::sync::Arc::new(Producer::connect(&d.socket, None).await.unwrap());

    // Nobody connected, and the request says not to wait.
    let c = p
        .confirm(Confirm {
            no_ui: Some(askbusd::protocol::NoUiPolicy::Reject),
            ..Confirm::exec("ls")
        })
        .await;
    assert!(!c.confirmed);
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::NoUi));
    assert_eq!(
        c.message.as_deref(),
        example("server/tool-confirmation-response.no-ui.json")["message"].as_str()
    );

    let mut ui = ui(&d).await;
    let c = p
        .confirm(Confirm {
            timeout_ms: Some(1000),
            ..Confirm::exec("ls")
        })
        .await;
    assert!(!c.confirmed);
    assert_eq!(c.outcome, ToolOutcome::Cancel);
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Timeout));
    assert_eq!(
        c.message.as_deref(),
        Some("Nobody approved the tool call within 1 second, so it was not approved.")
    );

    let p1 = p.clone();
    let asked = tokio::spawn(async move {
        p1.confirm(Confirm {
            correlation_id: Some("to-cancel".into()),
            ..Confirm::exec("ls")
        })
        .await
    });
    while next_approval(&mut ui).await.correlation_id != "to-cancel" {}
    p.cancel("to-cancel").await.unwrap();
    let c = asked.await.unwrap();
    assert!(!c.confirmed);
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Withdrawn));

    let mut bad = Confirm::exec("ls");
    bad.details = Some(json!({"type": "shell", "title": "T"}));
    let c = p.confirm(bad).await;
    assert!(!c.confirmed);
    let ConfirmationReason::Refused(e) = &c.reason else {
        panic!("not refused: {c:?}")
    };
    assert_eq!(e.code, "invalid-request");
    assert!(
        e.message.starts_with("details.type must be one of"),
        "{e:?}"
    );
    assert!(c
        .message
        .unwrap()
        .ends_with("so the tool call was not approved."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_or_a_shutdown_is_never_an_approval() {
    let mut d = Daemon::start();
    let mut ui = ui(&d).await;
    let options = ProducerOptions {
        backoff: Backoff::new(Duration::from_millis(20), Duration::from_millis(100)),
        ..ProducerOptions::default()
    };
    let p = Producer::connect_with(&d.socket, options.clone())
        .await
        .unwrap();
    let asked = tokio::spawn(async move {
        p.confirm(Confirm {
            timeout_ms: Some(1500),
            ..Confirm::exec("rm -rf build")
        })
        .await
    });
    next_approval(&mut ui).await;
    d.kill();
    let c = asked.await.unwrap();
    assert!(!c.confirmed);
    assert_eq!(c.outcome, ToolOutcome::Cancel);
    assert!(
        matches!(c.reason, ConfirmationReason::DaemonLost(_)),
        "{c:?}"
    );
    assert!(
        c.message.as_deref().unwrap().contains("not approved"),
        "{c:?}"
    );

    // A daemon stopping answers `shutdown`; with no daemon back before the deadline, that
    // is the answer.
    d.restart();
    let mut ui = Ui::subscribe(&d.socket, None).await.unwrap();
    let p = Producer::connect_with(&d.socket, options).await.unwrap();
    let asked = tokio::spawn(async move {
        p.confirm(Confirm {
            timeout_ms: Some(1500),
            ..Confirm::exec("rm -rf build")
        })
        .await
    });
    next_approval(&mut ui).await;
    d.terminate(Duration::from_secs(60));
    let c = asked.await.unwrap();
    assert!(!c.confirmed);
    assert_eq!(c.reason, ConfirmationReason::Daemon(Outcome::Shutdown));
    assert_eq!(
        c.message.as_deref(),
        example("server/tool-confirmation-response.shutdown.json")["message"].as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_ui_gets_approvals_in_its_replay_and_answers_them() {
    let d = Daemon::start();
    let mut watcher = d.connect().await;
    watcher.send(json!({"type": "watch"})).await;
    watcher.recv_type("watching").await;
    let p = std::sync::Arc::new(Producer::connect(&d.socket, None).await.unwrap());
    let p1 = p.clone();
    let approval = tokio::spawn(async move { p1.confirm(Confirm::exec("make")).await });
    let p2 = p.clone();
    let question = tokio::spawn(async move {
        p2.ask(askbusd::client::Ask {
            questions: json!([{"question": "Ship?", "header": "Ship", "type": "yesno"}]),
            ..Default::default()
        })
        .await
    });
    // Both pending before the UI comes.
    let mut requests = 0;
    while requests < 2 {
        let e = watcher.recv_type("bus-event").await;
        if e["event"] == "request" {
            requests += 1;
        }
    }
    let mut sub = UiSubscription::new(&d.socket, Some("test-ui/1"));
    let Update::Connected((pending, answerer)) = sub.next().await.unwrap() else {
        panic!("not connected")
    };
    assert_eq!(pending, 2);
    let mut replayed = Vec::new();
    while (replayed.len() as u64) < 2 {
        let Update::Event(e) = sub.next().await.unwrap() else {
            panic!("connection dropped")
        };
        if e.is_request() {
            replayed.push(e);
        }
    }
    for e in &replayed {
        match e {
            UiEvent::Approval(a) => answerer
                .decide(&a.correlation_id, &Decision::allow_once())
                .await
                .unwrap(),
            UiEvent::Request(r) => {
                let answers = [(0, "Yes".to_owned())].into_iter().collect();
                answerer.answer(&r.correlation_id, &answers).await.unwrap()
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(approval.await.unwrap().confirmed);
    assert_eq!(question.await.unwrap().unwrap().reason, Outcome::Answered);
}
