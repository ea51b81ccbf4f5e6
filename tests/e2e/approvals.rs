//! Approvals (`tool-confirmation-*`) through the real daemon: the golden story, every end
//! (none but a UI's explicit approval is `confirmed: true`), every error path, replay,
//! quotas shared with questions, telemetry, stats and watch events.

use crate::harness as common;

use std::path::PathBuf;
use std::time::Duration;

use common::{choice_request, Daemon, Raw};
use serde_json::{json, Value};

fn example(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("proto/examples")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The golden request (`client/tool-confirmation-request.json`) under another id.
fn approval(id: &str) -> Value {
    let mut v = example("client/tool-confirmation-request.json");
    v["correlationId"] = json!(id);
    v
}

fn decide(id: &str, outcome: &str) -> Value {
    json!({"type": "tool-confirmation-response", "correlationId": id,
           "confirmed": outcome != "cancel", "outcome": outcome})
}

/// Everything but the fields that differ between runs.
fn without(mut v: Value, pointers: &[&str]) -> Value {
    for p in pointers {
        let (parent, key) = p.rsplit_once('/').unwrap();
        if let Some(obj) = v.pointer_mut(parent).and_then(Value::as_object_mut) {
            obj.remove(key);
        }
    }
    v
}

async fn producer(d: &Daemon) -> Raw {
    let mut p = d.connect().await;
    p.send(example("client/hello.json")).await;
    p.recv_type("welcome").await;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_golden_story_allow_once_wins_and_the_others_are_withdrawn() {
    let d = Daemon::start();
    let (mut ui1, _) = d.ui().await;
    let (mut ui2, _) = d.ui().await;
    let mut p = producer(&d).await;
    p.send(example("client/tool-confirmation-request.json"))
        .await;
    let variable = ["/timeoutMs", "/producer/pid", "/producer/uid"];
    for ui in [&mut ui1, &mut ui2] {
        let got = ui.recv_type("tool-confirmation-request").await;
        assert_eq!(
            without(got.clone(), &variable),
            without(example("server/tool-confirmation-request.json"), &variable)
        );
        assert_eq!(got["producer"]["pid"], std::process::id());
        let left = got["timeoutMs"].as_u64().unwrap();
        assert!(left <= 120_000 && left > 100_000, "{left}");
    }
    ui2.send(example("client/tool-confirmation-response.json"))
        .await;
    assert_eq!(
        ui2.recv_type("tool-confirmation-ack").await,
        example("server/tool-confirmation-ack.json")
    );
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        example("server/tool-confirmation-response.answered.json")
    );
    assert_eq!(
        ui1.recv_type("tool-confirmation-withdrawn").await,
        example("server/tool-confirmation-withdrawn.json")
    );
    // A late decision finds nothing pending; the producer hears nothing more.
    ui1.send(decide("b1f4c2d8-6a3e-4f0b-9c27-5d8e1a7f3b64", "cancel"))
        .await;
    ui1.recv_error("not-pending").await;
    p.expect_silence(Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_deny_with_a_reason_and_dismissal_reach_the_producer_as_golden() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p = producer(&d).await;
    for (answer, response, ack) in [
        (
            "tool-confirmation-response.always.json",
            "tool-confirmation-response.always.json",
            None,
        ),
        (
            "tool-confirmation-response.deny.json",
            "tool-confirmation-response.denied.json",
            None,
        ),
        (
            "tool-confirmation-response.dismissed.json",
            "tool-confirmation-response.dismissed.json",
            Some("tool-confirmation-ack.dismissed.json"),
        ),
    ] {
        p.send(example("client/tool-confirmation-request.json"))
            .await;
        ui.recv_type("tool-confirmation-request").await;
        ui.send(example(&format!("client/{answer}"))).await;
        let got_ack = ui.recv_type("tool-confirmation-ack").await;
        if let Some(ack) = ack {
            assert_eq!(got_ack, example(&format!("server/{ack}")));
        }
        let got = p.recv_type("tool-confirmation-response").await;
        assert_eq!(got, example(&format!("server/{response}")), "{answer}");
        assert_eq!(got_ack["confirmed"], got["confirmed"]);
        assert_eq!(got_ack["outcome"], got["outcome"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_is_never_an_approval() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p = producer(&d).await;
    let mut req = approval("t1");
    req["timeoutMs"] = json!(50);
    p.send(req).await;
    ui.recv_type("tool-confirmation-request").await;
    let got = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        got,
        json!({"type": "tool-confirmation-response", "correlationId": "t1", "confirmed": false,
               "outcome": "cancel", "reason": "timeout",
               "message": "Nobody approved the tool call within 0.05 seconds, so it was not approved."})
    );
    assert_eq!(
        ui.recv_type("tool-confirmation-withdrawn").await,
        json!({"type": "tool-confirmation-withdrawn", "correlationId": "t1", "reason": "timeout"})
    );
    // The golden timeout is the 2-minute request's.
    let mut golden = example("server/tool-confirmation-response.timeout.json");
    golden["correlationId"] = json!("t1");
    golden["message"] = got["message"].clone();
    assert_eq!(got, golden);
    ui.send(decide("t1", "proceed_once")).await;
    ui.recv_error("not-pending").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ui_withdrawn_and_producer_gone_are_never_approvals() {
    let d = Daemon::start();
    let mut p = producer(&d).await;
    p.send(example(
        "client/tool-confirmation-request.no-ui-reject.json",
    ))
    .await;
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        example("server/tool-confirmation-response.no-ui.json")
    );

    let (mut ui, _) = d.ui().await;
    p.send(example("client/tool-confirmation-request.json"))
        .await;
    ui.recv_type("tool-confirmation-request").await;
    // The question's cancel does not withdraw an approval, nor the other way round.
    p.send(
        json!({"type": "ask-user-cancel", "correlationId": "b1f4c2d8-6a3e-4f0b-9c27-5d8e1a7f3b64"}),
    )
    .await;
    p.recv_error("not-pending").await;
    p.send(choice_request("q1")).await;
    ui.recv_type("ask-user-request").await;
    p.send(json!({"type": "tool-confirmation-cancel", "correlationId": "q1"}))
        .await;
    p.recv_error("not-pending").await;
    p.send(example("client/tool-confirmation-cancel.json"))
        .await;
    assert_eq!(
        p.recv_type("tool-confirmation-response").await,
        example("server/tool-confirmation-response.withdrawn.json")
    );
    assert_eq!(
        ui.recv_type("tool-confirmation-withdrawn").await["reason"],
        "withdrawn"
    );
    // Another connection cannot cancel it.
    p.send(approval("mine")).await;
    ui.recv_type("tool-confirmation-request").await;
    let mut other = d.connect().await;
    other
        .send(json!({"type": "tool-confirmation-cancel", "correlationId": "mine"}))
        .await;
    other.recv_error("not-pending").await;

    drop(p);
    let mut gone = Vec::new();
    for _ in 0..2 {
        gone.push(ui.recv().await);
    }
    gone.sort_by_key(|v| v["type"].as_str().unwrap().to_owned());
    assert_eq!(
        gone,
        vec![
            json!({"type": "ask-user-withdrawn", "correlationId": "q1", "reason": "producer-gone"}),
            json!({"type": "tool-confirmation-withdrawn", "correlationId": "mine", "reason": "producer-gone"}),
        ]
    );
}

#[test]
fn shutdown_answers_a_pending_approval_not_approved() {
    let rt = common::rt();
    let mut d = Daemon::start();
    let mut p = rt.block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = producer(&d).await;
        p.send(example("client/tool-confirmation-request.json"))
            .await;
        ui.recv_type("tool-confirmation-request").await;
        p
    });
    d.signal(libc::SIGTERM);
    rt.block_on(async {
        assert_eq!(
            p.recv_type("tool-confirmation-response").await,
            example("server/tool-confirmation-response.shutdown.json")
        );
    });
    assert!(d.wait_exit(Duration::from_secs(10)).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_requests_are_refused_naming_the_field() {
    let d = Daemon::start();
    let mut p = producer(&d).await;
    p.send(example("client/tool-confirmation-request.invalid.json"))
        .await;
    assert_eq!(
        p.recv_type("error").await,
        example("server/error.invalid-request.tool-confirmation.json")
    );
    type Case = (fn(&mut Value), Option<&'static str>, &'static str);
    let cases: Vec<Case> = vec![
        (
            |v| {
                v.as_object_mut().unwrap().remove("correlationId");
            },
            None,
            "tool-confirmation-request needs a string \"correlationId\"",
        ),
        (
            |v| v["timeoutMs"] = json!(0),
            Some("x"),
            "timeoutMs must be at least 1",
        ),
        (
            |v| v["noUi"] = json!("maybe"),
            Some("x"),
            "noUi must be \"wait\" or \"reject\", not \"maybe\"",
        ),
        (
            |v| v["toolCall"] = json!("rm -rf build"),
            Some("x"),
            "toolCall must be an object, not a string",
        ),
        (
            |v| v["toolCall"]["name"] = json!(""),
            Some("x"),
            "toolCall.name must be a non-empty string",
        ),
        (
            |v| {
                v["details"].as_object_mut().unwrap().remove("rootCommand");
            },
            Some("x"),
            "details.rootCommand is required for type \"exec\"",
        ),
        (
            |v| v["details"]["rootCommands"] = json!(["rm", 7]),
            Some("x"),
            "details.rootCommands[1] must be a string, not a number",
        ),
        (
            |v| v["details"]["type"] = json!("shell"),
            Some("x"),
            "details.type must be one of sandbox_expansion, info, edit, exec, mcp, ask_user, exit_plan_mode, not \"shell\"",
        ),
        (
            |v| v["outcomes"] = json!(["proceed_once", "proceed_once"]),
            Some("x"),
            "outcomes lists \"proceed_once\" twice",
        ),
    ];
    for (mutate, id, message) in cases {
        let mut v = approval("x");
        mutate(&mut v);
        p.send(v).await;
        let err = p.recv_error("invalid-request").await;
        assert_eq!(err["message"], message);
        assert_eq!(err["correlationId"].as_str(), id, "{err}");
    }
    // Each refused request left one record, as questions do.
    let records = d.wait_telemetry(10);
    assert_eq!(records.len(), 10);
    for r in &records {
        assert_eq!(r["kind"], "approval", "{r}");
        assert_eq!(r["reason"], "rejected");
        assert_eq!(r["code"], "invalid-request");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_decisions_leave_the_approval_pending() {
    let d = Daemon::start();
    let (mut ui, _) = d.ui().await;
    let mut p = producer(&d).await;
    p.send(approval("a1")).await;
    ui.recv_type("tool-confirmation-request").await;
    p.send(choice_request("q1")).await;
    ui.recv_type("ask-user-request").await;

    let mut not_ui = d.connect().await;
    not_ui.send(decide("a1", "proceed_once")).await;
    not_ui.recv_error("not-subscribed").await;

    for (frame, message) in [
        (
            decide("a1", "proceed_always_server"),
            "outcome proceed_always_server is not offered by this request (it offers proceed_once, proceed_always, cancel)",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": true, "outcome": "cancel"}),
            "confirmed is true but outcome is \"cancel\" (cancel denies)",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": false, "outcome": "proceed_once"}),
            "confirmed is false but outcome \"proceed_once\" approves",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1"}),
            "tool-confirmation-response needs \"confirmed\" (or \"dismissed\": true)",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": "yes"}),
            "confirmed must be a boolean, not a string",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": true, "outcome": "always"}),
            "outcome must be one of proceed_once, proceed_always, proceed_always_and_save, proceed_always_server, proceed_always_tool, modify_with_editor, cancel, not \"always\"",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": false, "message": 5}),
            "message must be a string, not a number",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": false, "message": "x".repeat(4097)}),
            "message must be at most 4096 characters",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "confirmed": true, "payload": []}),
            "payload must be an object, not an array",
        ),
        (
            json!({"type": "tool-confirmation-response", "correlationId": "a1", "dismissed": 1}),
            "dismissed must be a boolean, not a number",
        ),
        (
            json!({"type": "ask-user-response", "correlationId": "a1", "answers": {"0": "Yes"}}),
            "correlationId \"a1\" is a tool confirmation; answer it with tool-confirmation-response",
        ),
        (
            decide("q1", "proceed_once"),
            "correlationId \"q1\" is a question; answer it with ask-user-response",
        ),
    ] {
        ui.send(frame).await;
        let err = ui.recv_error("invalid-response").await;
        assert_eq!(err["message"], message);
    }
    ui.send(json!({"type": "tool-confirmation-response", "correlationId": "a1"}))
        .await;
    ui.recv_error("invalid-response").await;
    ui.send(json!({"type": "tool-confirmation-response"})).await;
    let err = ui.recv_error("invalid-response").await;
    assert!(err.get("correlationId").is_none());
    ui.send(decide("nope", "proceed_once")).await;
    ui.recv_error("not-pending").await;
    // Nothing reached the producer; the approval is still there to decide.
    p.expect_silence(Duration::from_millis(100)).await;
    ui.send(decide("a1", "cancel")).await;
    ui.recv_type("tool-confirmation-ack").await;
    let got = p.recv_type("tool-confirmation-response").await;
    assert_eq!(got["confirmed"], false);
    assert_eq!(got["reason"], "answered");
    assert!(got.get("message").is_none(), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_questions_share_replay_ids_and_quotas() {
    let d = Daemon::start_with(&["--max-pending-per-connection", "3"]);
    let mut p = producer(&d).await;
    p.send(approval("a1")).await;
    p.send(choice_request("q1")).await;
    let mut mcp = example("client/tool-confirmation-request.mcp.json");
    mcp["correlationId"] = json!("a2");
    p.send(mcp.clone()).await;
    p.ping().await;
    // One id space: an approval cannot reuse a pending question's id, nor the reverse.
    p.send(approval("q1")).await;
    p.recv_error("duplicate-correlation-id").await;
    p.send(choice_request("a1")).await;
    p.recv_error("duplicate-correlation-id").await;
    // One quota.
    p.send(approval("a3")).await;
    p.recv_error("too-many-pending").await;

    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, 3);
    let order: Vec<(String, String)> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            let f = ui.recv().await;
            v.push((
                f["type"].as_str().unwrap().to_owned(),
                f["correlationId"].as_str().unwrap().to_owned(),
            ));
        }
        v
    };
    assert_eq!(
        order,
        [
            ("tool-confirmation-request", "a1"),
            ("ask-user-request", "q1"),
            ("tool-confirmation-request", "a2"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // The MCP approval offers its "always" outcomes; the UI may use them.
    ui.send(decide("a2", "proceed_always_server")).await;
    ui.recv_type("tool-confirmation-ack").await;
    let got = p.recv_type("tool-confirmation-response").await;
    assert_eq!(got["confirmed"], true);
    assert_eq!(got["outcome"], "proceed_always_server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_stats_and_watch_count_approvals_apart() {
    let d = Daemon::start();
    let mut watcher = d.connect().await;
    watcher.send(example("client/watch.json")).await;
    watcher.recv_type("watching").await;
    let (mut ui, _) = d.ui().await;
    let mut p = producer(&d).await;
    p.send(approval("a1")).await;
    ui.recv_type("tool-confirmation-request").await;
    ui.send(decide("a1", "proceed_always")).await;
    ui.recv_type("tool-confirmation-ack").await;
    p.recv_type("tool-confirmation-response").await;
    p.send(choice_request("q1")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(common::answer("q1", json!({"0": "SQLite"}))).await;
    ui.recv_type("ask-user-ack").await;
    p.recv_type("ask-user-response").await;

    let request = watcher.recv_type("bus-event").await;
    assert_eq!(request["event"], "request");
    assert_eq!(request["kind"], "approval");
    assert_eq!(request["tool"], "run_shell_command");
    assert_eq!(request["detailsType"], "exec");
    assert_eq!(request["timeoutMs"], 120_000);
    assert!(request.get("confirmed").is_none());
    let answered = watcher.recv_type("bus-event").await;
    assert_eq!(answered["event"], "answered");
    assert_eq!(answered["kind"], "approval");
    assert_eq!(answered["confirmed"], true);
    assert_eq!(answered["outcome"], "proceed_always");
    assert_eq!(answered["ui"]["client"], "test-ui/1");
    let question = watcher.recv_type("bus-event").await;
    assert!(question.get("kind").is_none(), "{question}");

    let records = d.wait_telemetry(2);
    let a = &records[0];
    assert_eq!(a["kind"], "approval");
    assert_eq!(a["correlationId"], "a1");
    assert_eq!(a["reason"], "answered");
    assert_eq!(a["tool"], "run_shell_command");
    assert_eq!(a["detailsType"], "exec");
    assert_eq!(a["confirmed"], true);
    assert_eq!(a["outcome"], "proceed_always");
    assert_eq!(a["ui"]["client"], "test-ui/1");
    assert!(a.get("question_types").is_none(), "{a}");
    assert!(records[1].get("kind").is_none());

    p.send(json!({"type": "stats"})).await;
    let stats = p.recv_type("stats").await;
    assert_eq!(stats["requests"]["accepted"], 2);
    assert_eq!(stats["outcomes"]["answered"], 2);
    let ap = &stats["approvals"];
    assert_eq!(
        ap["requests"],
        json!({"accepted": 1, "rejected": 0, "resolved": 1})
    );
    assert_eq!(ap["outcomes"]["answered"], 1);
    assert_eq!(ap["decisions"]["proceed_always"], 1);
    assert_eq!(ap["confirmed"], 1);
    assert_eq!(ap["latencyMs"]["count"], 1);
}
