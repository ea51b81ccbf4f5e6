//! The broker state machine without sockets: every operation's effects, checked frame by
//! frame, with time passed in explicitly.

use serde_json::{json, Value};

use tokio::time::Duration;

use super::*;
use crate::protocol::{parse_inbound, AskUserResponse, BusEventKind, End, Inbound, RequestKind};

const PRODUCER: PeerId = 1;
const UI_A: PeerId = 10;
const UI_B: PeerId = 11;

fn broker() -> Broker {
    let mut b = Broker::new(Limits::default());
    for (id, pid) in [(PRODUCER, 100), (UI_A, 200), (UI_B, 201)] {
        b.connect(
            id,
            PeerInfo {
                client: None,
                pid: Some(pid),
                uid: 1000,
                gid: 1000,
                ..PeerInfo::default()
            },
        );
    }
    b
}

fn request(id: &str, extra: Value) -> Valid {
    let mut frame = json!({
        "type": "ask-user-request",
        "correlationId": id,
        "questions": [{"question": "Q?", "header": "H", "type": "text"}]
    });
    for (k, v) in extra.as_object().unwrap() {
        frame[k] = v.clone();
    }
    let frame = frame.to_string();
    crate::intake::read_remote(frame.as_bytes(), RequestKind::Question).unwrap()
}

fn response(id: &str, answers: Value, cancelled: bool) -> AskUserResponse {
    let frame = json!({"type": "ask-user-response", "correlationId": id, "answers": answers, "cancelled": cancelled});
    let Inbound::AskUserResponse(r) = parse_inbound(frame.to_string().as_bytes()).unwrap() else {
        panic!("not a response")
    };
    r
}

/// The frames in `fx`, decoded, with the peer each goes to (errors as error frames).
fn sent(fx: &mut Effects) -> Vec<(PeerId, Value)> {
    let out = fx
        .sends
        .drain(..)
        .map(|(peer, msg)| {
            let v = match msg {
                Msg::Frame(b) => serde_json::from_slice(&b).unwrap(),
                Msg::Error(e) => json!({"type": "error", "code": e.code.as_str(), "correlationId": e.correlation_id}),
            };
            (peer, v)
        })
        .collect();
    fx.replay.clear();
    out
}

fn types(frames: &[(PeerId, Value)]) -> Vec<(PeerId, String)> {
    frames
        .iter()
        .map(|(p, v)| (*p, v["type"].as_str().unwrap().to_owned()))
        .collect()
}

/// Subscribes and runs the replay to completion.
fn subscribe(b: &mut Broker, ui: PeerId, now: Instant, fx: &mut Effects) {
    b.subscribe(ui, None, SubscribeFilter::default(), fx);
    while b.replay(ui, step(64), now, fx) == ReplayStep::More {}
}

#[test]
fn answer_resolves_once_and_withdraws_from_the_others() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    subscribe(&mut b, UI_A, t0, &mut fx);
    subscribe(&mut b, UI_B, t0, &mut fx);
    sent(&mut fx);
    b.ask(PRODUCER, request("a", json!({})), t0, &mut fx);
    assert_eq!(
        types(&sent(&mut fx)),
        [
            (UI_A, "ask-user-request".into()),
            (UI_B, "ask-user-request".into())
        ]
    );
    assert_eq!(b.pending_len(), 1);
    let t1 = t0 + Duration::from_millis(5);
    b.respond(UI_B, response("a", json!({"0": "hi"}), false), t1, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(
        types(&frames),
        [
            (UI_A, "ask-user-withdrawn".into()),
            (UI_B, "ask-user-ack".into()),
            (PRODUCER, "ask-user-response".into())
        ]
    );
    assert_eq!(frames[2].1["reason"], "answered");
    assert_eq!(fx.records.len(), 1);
    assert_eq!(fx.records[0].latency_ms, 5);
    assert_eq!(fx.records[0].ui.as_ref().unwrap().pid, Some(201));
    assert_eq!(b.pending_len(), 0);
    assert_eq!(b.next_deadline(), None);
    b.respond(
        UI_A,
        response("a", json!({"0": "late"}), false),
        t1,
        &mut fx,
    );
    assert_eq!(sent(&mut fx)[0].1["code"], "not-pending");
    assert_eq!(b.stats().ended(End::Answered), 1);
}

#[test]
fn deadlines_expire_in_order_and_only_when_due() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(
        PRODUCER,
        request("slow", json!({"timeoutMs": 500})),
        t0,
        &mut fx,
    );
    b.ask(
        PRODUCER,
        request("fast", json!({"timeoutMs": 100})),
        t0,
        &mut fx,
    );
    assert_eq!(b.next_deadline(), Some(t0 + Duration::from_millis(100)));
    b.expire(t0 + Duration::from_millis(99), &mut fx);
    assert!(fx.sends.is_empty());
    b.expire(t0 + Duration::from_millis(100), &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["correlationId"], "fast");
    assert_eq!(frames[0].1["reason"], "timeout");
    assert_eq!(b.next_deadline(), Some(t0 + Duration::from_millis(500)));
    b.expire(t0 + Duration::from_secs(60), &mut fx);
    assert_eq!(sent(&mut fx)[0].1["correlationId"], "slow");
    assert_eq!(b.pending_len(), 0);
}

#[test]
fn timeouts_clamp_to_the_maximum_and_default_otherwise() {
    let mut b = Broker::new(Limits {
        default_timeout_ms: 1000,
        max_timeout_ms: 2000,
        ..Limits::default()
    });
    b.connect(PRODUCER, PeerInfo::default());
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(PRODUCER, request("d", json!({})), t0, &mut fx);
    b.ask(
        PRODUCER,
        request("c", json!({"timeoutMs": 1e300})),
        t0,
        &mut fx,
    );
    assert_eq!(b.next_deadline(), Some(t0 + Duration::from_millis(1000)));
    b.expire(t0 + Duration::from_millis(1000), &mut fx);
    assert_eq!(b.next_deadline(), Some(t0 + Duration::from_millis(2000)));
}

#[test]
fn replay_is_chunked_ordered_and_never_duplicates_live_requests() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    let mut limits = b.limits().clone();
    limits.max_pending_per_connection = 1000;
    b.set_limits(limits);
    for i in 0..10 {
        b.ask(PRODUCER, request(&format!("r{i}"), json!({})), t0, &mut fx);
    }
    b.subscribe(UI_A, None, SubscribeFilter::default(), &mut fx);
    assert_eq!(
        sent(&mut fx)[0].1,
        json!({"type": "subscribed", "pending": 10})
    );
    assert_eq!(b.replay(UI_A, step(4), t0, &mut fx), ReplayStep::More);
    let first: Vec<_> = sent(&mut fx)
        .into_iter()
        .map(|(_, v)| v["correlationId"].clone())
        .collect();
    assert_eq!(first, ["r0", "r1", "r2", "r3"]);
    // A live request during catch-up is not sent live; the replay reaches it in order.
    b.ask(PRODUCER, request("live", json!({})), t0, &mut fx);
    assert!(sent(&mut fx).is_empty());
    // A withdrawal is sent only for what the UI has already been shown.
    b.cancel(PRODUCER, "r1", t0, &mut fx);
    b.cancel(PRODUCER, "r7", t0, &mut fx);
    let frames = sent(&mut fx);
    let to_ui: Vec<_> = frames.iter().filter(|(p, _)| *p == UI_A).collect();
    assert_eq!(to_ui.len(), 1);
    assert_eq!(to_ui[0].1["correlationId"], "r1");
    while b.replay(UI_A, step(4), t0, &mut fx) == ReplayStep::More {}
    let rest: Vec<_> = sent(&mut fx)
        .into_iter()
        .map(|(_, v)| v["correlationId"].clone())
        .collect();
    assert_eq!(rest, ["r4", "r5", "r6", "r8", "r9", "live"]);
    b.ask(PRODUCER, request("after", json!({})), t0, &mut fx);
    assert_eq!(sent(&mut fx)[0].1["correlationId"], "after");
}

#[test]
fn no_ui_reject_answers_at_once_only_without_uis() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(
        PRODUCER,
        request("n", json!({"noUi": "reject"})),
        t0,
        &mut fx,
    );
    let frames = sent(&mut fx);
    assert_eq!(frames[0].1["reason"], "no-ui");
    assert_eq!(b.pending_len(), 0);
    assert_eq!(fx.records[0].reason, End::NoUi);
    b.ask(PRODUCER, request("w", json!({})), t0, &mut fx);
    assert!(sent(&mut fx).is_empty());
    assert_eq!(b.pending_len(), 1);
}

#[test]
fn producer_gone_withdraws_and_logs_without_a_response() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    subscribe(&mut b, UI_A, t0, &mut fx);
    b.ask(PRODUCER, request("g", json!({})), t0, &mut fx);
    sent(&mut fx);
    fx.records.clear();
    b.disconnect(PRODUCER, t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        frames[0],
        (
            UI_A,
            json!({"type": "ask-user-withdrawn", "correlationId": "g", "reason": "producer-gone"})
        )
    );
    assert_eq!(fx.records[0].reason, End::ProducerGone);
    assert_eq!(b.pending_len(), 0);
    assert_eq!(b.next_deadline(), None);
}

#[test]
fn limits_duplicates_and_rejections_are_errors_with_records() {
    let mut b = Broker::new(Limits {
        max_pending_per_connection: 1,
        ..Limits::default()
    });
    b.connect(PRODUCER, PeerInfo::default());
    b.connect(2, PeerInfo::default());
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(PRODUCER, request("x", json!({})), t0, &mut fx);
    b.ask(2, request("x", json!({})), t0, &mut fx);
    b.ask(PRODUCER, request("y", json!({})), t0, &mut fx);
    let codes: Vec<_> = sent(&mut fx)
        .into_iter()
        .map(|(p, v)| (p, v["code"].clone()))
        .collect();
    assert_eq!(
        codes,
        [
            (2, json!("duplicate-correlation-id")),
            (PRODUCER, json!("too-many-pending"))
        ]
    );
    assert_eq!(
        fx.records
            .iter()
            .filter(|r| r.reason == End::Rejected)
            .count(),
        2
    );
    assert_eq!(b.stats().rejected(), 2);
}

#[test]
fn responses_need_a_subscription_and_indices_in_range() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(PRODUCER, request("r", json!({})), t0, &mut fx);
    b.respond(UI_A, response("r", json!({"0": "x"}), false), t0, &mut fx);
    assert_eq!(sent(&mut fx)[0].1["code"], "not-subscribed");
    subscribe(&mut b, UI_A, t0, &mut fx);
    sent(&mut fx);
    b.respond(UI_A, response("r", json!({"1": "x"}), false), t0, &mut fx);
    assert_eq!(sent(&mut fx)[0].1["code"], "invalid-response");
    assert_eq!(b.pending_len(), 1);
    // A dismissal ignores whatever answers came with it.
    b.respond(UI_A, response("r", json!({"3": "x"}), true), t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames[1].1["reason"], "dismissed");
    assert_eq!(frames[1].1["answers"], json!({}));
}

#[test]
fn shutdown_ends_everything_and_later_requests_at_once() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    subscribe(&mut b, UI_A, t0, &mut fx);
    b.ask(PRODUCER, request("s1", json!({})), t0, &mut fx);
    b.ask(PRODUCER, request("s2", json!({})), t0, &mut fx);
    sent(&mut fx);
    b.shutdown(t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 4);
    assert!(frames
        .iter()
        .filter(|(p, _)| *p == PRODUCER)
        .all(|(_, v)| v["reason"] == "shutdown"));
    assert!(frames
        .iter()
        .filter(|(p, _)| *p == UI_A)
        .all(|(_, v)| v["reason"] == "shutdown"));
    b.ask(PRODUCER, request("s3", json!({})), t0, &mut fx);
    assert_eq!(sent(&mut fx)[0].1["reason"], "shutdown");
    assert_eq!(b.pending_len(), 0);
}

#[test]
fn watchers_get_events_and_nothing_else() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.watch(UI_B, Some("ops".into()), &mut fx);
    assert_eq!(sent(&mut fx)[0].1["type"], "watching");
    b.ask(PRODUCER, request("e", json!({})), t0, &mut fx);
    assert!(sent(&mut fx).is_empty(), "no UI frames to a watcher");
    assert_eq!(fx.events.len(), 1);
    assert_eq!(fx.events[0].event, BusEventKind::Request);
    assert_eq!(fx.events[0].headers, ["H"]);
    b.cancel(PRODUCER, "e", t0 + Duration::from_millis(3), &mut fx);
    assert_eq!(fx.events[1].event, BusEventKind::End(End::Withdrawn));
    assert_eq!(fx.events[1].latency_ms, Some(3));
    assert_eq!(b.watchers_of(1000).collect::<Vec<_>>(), [UI_B]);
}

const OTHER_PRODUCER: PeerId = 2;
const OTHER_UI: PeerId = 12;
const OPERATOR: PeerId = 13;

/// The shared broker plus another user (uid 2000: a producer and a UI) and an operator.
fn shared_broker() -> Broker {
    let mut b = broker();
    for (id, uid, operator) in [
        (OTHER_PRODUCER, 2000, false),
        (OTHER_UI, 2000, false),
        (OPERATOR, 3000, true),
    ] {
        b.connect(
            id,
            PeerInfo {
                uid,
                gid: uid,
                pid: Some(id as i32),
                rights: Rights {
                    operator,
                    ..Rights::default()
                },
                ..PeerInfo::default()
            },
        );
    }
    b
}

fn frames_to(frames: &[(PeerId, Value)], peer: PeerId) -> Vec<Value> {
    frames
        .iter()
        .filter(|(p, _)| *p == peer)
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn a_ui_sees_only_its_own_uids_questions_unless_it_is_an_operator() {
    let mut b = shared_broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(PRODUCER, request("mine", json!({})), t0, &mut fx);
    b.ask(OTHER_PRODUCER, request("theirs", json!({})), t0, &mut fx);
    sent(&mut fx);
    // Replay: the count and the frames are the UI's own uid's only.
    for (ui, want) in [
        (UI_A, vec!["mine"]),
        (OTHER_UI, vec!["theirs"]),
        (OPERATOR, vec!["mine", "theirs"]),
    ] {
        subscribe(&mut b, ui, t0, &mut fx);
        let frames = frames_to(&sent(&mut fx), ui);
        assert_eq!(frames[0]["pending"], want.len(), "{ui}");
        let ids: Vec<_> = frames[1..]
            .iter()
            .map(|f| f["correlationId"].clone())
            .collect();
        assert_eq!(ids, want, "{ui}");
    }
    // Live: the same.
    b.ask(OTHER_PRODUCER, request("theirs-2", json!({})), t0, &mut fx);
    let frames = sent(&mut fx);
    let to: BTreeSet<PeerId> = frames.iter().map(|(p, _)| *p).collect();
    assert_eq!(to, [OTHER_UI, OPERATOR].into());
    // Answering another user's question is forbidden, and changes nothing.
    b.respond(
        UI_A,
        response("theirs", json!({"0": "x"}), false),
        t0,
        &mut fx,
    );
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].0, UI_A);
    assert_eq!(frames[0].1["code"], "forbidden");
    assert_eq!(b.pending_len(), 3);
    // The operator may answer it; the withdrawal goes to who saw it, not to UI_A.
    b.respond(
        OPERATOR,
        response("theirs", json!({"0": "x"}), false),
        t0,
        &mut fx,
    );
    assert_eq!(
        types(&sent(&mut fx)),
        [
            (OTHER_UI, "ask-user-withdrawn".into()),
            (OPERATOR, "ask-user-ack".into()),
            (OTHER_PRODUCER, "ask-user-response".into())
        ]
    );
}

#[test]
fn watchers_see_events_of_their_own_uid_unless_operators() {
    let mut b = shared_broker();
    let mut fx = Effects::default();
    b.watch(UI_A, None, &mut fx);
    b.watch(OPERATOR, None, &mut fx);
    assert_eq!(b.watchers_of(1000).collect::<Vec<_>>(), [UI_A, OPERATOR]);
    assert_eq!(b.watchers_of(2000).collect::<Vec<_>>(), [OPERATOR]);
}

#[test]
fn rights_forbid_roles_and_quotas_count_per_uid() {
    let mut b = Broker::new(Limits {
        max_pending_per_uid: 2,
        ..Limits::default()
    });
    let ui_only = Rights {
        produce: false,
        ..Rights::default()
    };
    let producer_only = Rights {
        ui: false,
        ..Rights::default()
    };
    for (id, rights) in [(1, producer_only), (2, producer_only), (3, ui_only)] {
        b.connect(
            id,
            PeerInfo {
                uid: 7,
                rights,
                ..PeerInfo::default()
            },
        );
    }
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.subscribe(1, None, SubscribeFilter::default(), &mut fx);
    b.watch(1, None, &mut fx);
    b.ask(3, request("no", json!({})), t0, &mut fx);
    let codes: Vec<_> = sent(&mut fx)
        .into_iter()
        .map(|(p, v)| (p, v["code"].clone()))
        .collect();
    assert_eq!(
        codes,
        [
            (1, json!("forbidden")),
            (1, json!("forbidden")),
            (3, json!("forbidden"))
        ]
    );
    assert_eq!(b.stats().rejected(), 1);
    assert_eq!(
        fx.records[0].code,
        Some(crate::protocol::ErrorCode::Forbidden)
    );
    // Two connections of one uid share its quota of 2.
    b.ask(1, request("a", json!({})), t0, &mut fx);
    b.ask(2, request("b", json!({})), t0, &mut fx);
    b.ask(2, request("c", json!({})), t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["code"], "too-many-pending");
    b.cancel(1, "a", t0, &mut fx);
    sent(&mut fx);
    b.ask(2, request("c", json!({})), t0, &mut fx);
    assert!(sent(&mut fx).is_empty(), "a freed slot is reusable");
    // A refused attempt still makes a producer; a peer that did nothing is idle.
    b.connect(4, PeerInfo::default());
    assert_eq!(
        b.role_counts(),
        RoleCounts {
            producer: 3,
            ui: 0,
            watcher: 0,
            idle: 1
        }
    );
}

#[test]
fn new_rights_send_or_withdraw_what_a_ui_may_now_see() {
    let mut b = shared_broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(PRODUCER, request("mine", json!({})), t0, &mut fx);
    b.ask(OTHER_PRODUCER, request("theirs", json!({})), t0, &mut fx);
    subscribe(&mut b, UI_A, t0, &mut fx);
    sent(&mut fx);
    let operator = Rights {
        operator: true,
        ..Rights::default()
    };
    b.set_rights(UI_A, operator, t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["type"], "ask-user-request");
    assert_eq!(frames[0].1["correlationId"], "theirs");
    b.set_rights(UI_A, Rights::default(), t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["type"], "ask-user-withdrawn");
    assert_eq!(frames[0].1["correlationId"], "theirs");
    // Losing the UI right withdraws everything it saw, and it is a UI no more.
    let no_ui = Rights {
        ui: false,
        ..Rights::default()
    };
    b.set_rights(UI_A, no_ui, t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["correlationId"], "mine");
    b.ask(PRODUCER, request("later", json!({})), t0, &mut fx);
    assert!(frames_to(&sent(&mut fx), UI_A).is_empty());
    assert_eq!(b.ui_count(), 0);
}

fn filter(project: &str) -> SubscribeFilter {
    SubscribeFilter {
        project: Some(project.into()),
        ..SubscribeFilter::default()
    }
}

/// A UI that subscribed with a filter is replayed, sent, counted, withdrawn from and may
/// answer only the requests whose context matches; the others go on as if it were not there.
#[test]
fn a_filtered_ui_sees_and_answers_only_matching_requests() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    let ctx = |p: &str| json!({"context": {"project": p, "agent": "gemini-cli/0.61.0"}});
    b.ask(PRODUCER, request("web-1", ctx("web")), t0, &mut fx);
    b.ask(PRODUCER, request("api-1", ctx("api")), t0, &mut fx);
    b.ask(PRODUCER, request("none", json!({})), t0, &mut fx);
    sent(&mut fx);
    // Replayed and counted: only its project's.
    b.subscribe(UI_A, None, filter("web"), &mut fx);
    while b.replay(UI_A, step(64), t0, &mut fx) == ReplayStep::More {}
    let frames = sent(&mut fx);
    assert_eq!(frames[0].1, json!({"type": "subscribed", "pending": 1}));
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1].1["correlationId"], "web-1");
    assert_eq!(
        frames[1].1["context"],
        json!({"agent": "gemini-cli/0.61.0", "project": "web"})
    );
    subscribe(&mut b, UI_B, t0, &mut fx);
    assert_eq!(
        sent(&mut fx)[0].1,
        json!({"type": "subscribed", "pending": 3})
    );
    // Live: the unfiltered UI gets both, the filtered one its own.
    b.ask(PRODUCER, request("web-2", ctx("web")), t0, &mut fx);
    b.ask(PRODUCER, request("api-2", ctx("api")), t0, &mut fx);
    let to: Vec<_> = sent(&mut fx)
        .into_iter()
        .map(|(p, v)| (p, v["correlationId"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        to,
        [
            (UI_A, "web-2".into()),
            (UI_B, "web-2".into()),
            (UI_B, "api-2".into())
        ]
    );
    // Answering what it was not shown is refused, and the request stays pending.
    b.respond(
        UI_A,
        response("api-1", json!({"0": "x"}), false),
        t0,
        &mut fx,
    );
    let frames = sent(&mut fx);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].1["code"], "forbidden");
    assert!(b.pending.contains("api-1"));
    // Withdrawals go only where the request went.
    b.respond(
        UI_B,
        response("api-1", json!({"0": "x"}), false),
        t0,
        &mut fx,
    );
    assert!(sent(&mut fx).iter().all(|(p, _)| *p != UI_A));
    b.cancel(PRODUCER, "web-1", t0, &mut fx);
    let to: Vec<_> = types(&sent(&mut fx));
    assert_eq!(
        to,
        [
            (UI_A, "ask-user-withdrawn".into()),
            (UI_B, "ask-user-withdrawn".into()),
            (PRODUCER, "ask-user-response".into())
        ]
    );
}

/// "No UI" counts only the UIs that would be shown the request.
#[test]
fn no_ui_counts_only_uis_whose_filter_matches() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.subscribe(UI_A, None, filter("web"), &mut fx);
    while b.replay(UI_A, step(64), t0, &mut fx) == ReplayStep::More {}
    sent(&mut fx);
    let reject = |p: &str| json!({"noUi": "reject", "context": {"project": p}});
    b.ask(PRODUCER, request("api", reject("api")), t0, &mut fx);
    let frames = sent(&mut fx);
    assert_eq!(types(&frames), [(PRODUCER, "ask-user-response".into())]);
    assert_eq!(frames[0].1["reason"], "no-ui");
    b.ask(PRODUCER, request("web", reject("web")), t0, &mut fx);
    assert_eq!(types(&sent(&mut fx)), [(UI_A, "ask-user-request".into())]);
    b.ask(
        PRODUCER,
        request("bare", json!({"noUi": "reject"})),
        t0,
        &mut fx,
    );
    assert_eq!(sent(&mut fx)[0].1["reason"], "no-ui");
}

/// Subscribing again with another filter takes off the screen what no longer matches.
#[test]
fn resubscribing_with_another_filter_withdraws_what_it_no_longer_asks_for() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.ask(
        PRODUCER,
        request("web", json!({"context": {"project": "web"}})),
        t0,
        &mut fx,
    );
    b.ask(
        PRODUCER,
        request("api", json!({"context": {"project": "api"}})),
        t0,
        &mut fx,
    );
    subscribe(&mut b, UI_A, t0, &mut fx);
    assert_eq!(sent(&mut fx).len(), 3);
    b.subscribe(UI_A, None, filter("api"), &mut fx);
    while b.replay(UI_A, step(64), t0, &mut fx) == ReplayStep::More {}
    let frames = sent(&mut fx);
    assert_eq!(
        frames.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()[..2],
        [
            json!({"type": "ask-user-withdrawn", "correlationId": "web", "reason": "withdrawn"}),
            json!({"type": "subscribed", "pending": 1}),
        ]
    );
    assert_eq!(frames[2].1["correlationId"], "api");
    assert_eq!(frames.len(), 3);
}

/// Records and watcher events carry the context's agent and project, nothing else of it.
#[test]
fn records_and_events_carry_agent_and_project() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    b.watch(UI_B, None, &mut fx);
    let ctx =
        json!({"context": {"project": "web", "agent": "claude-code/1.0", "title": "secret plan"}});
    b.ask(PRODUCER, request("a", ctx.clone()), t0, &mut fx);
    b.ask(PRODUCER, request("a", ctx), t0, &mut fx);
    b.cancel(PRODUCER, "a", t0, &mut fx);
    assert_eq!(fx.records.len(), 2);
    for r in &fx.records {
        assert_eq!(r.agent.as_deref(), Some("claude-code/1.0"));
        assert_eq!(r.project.as_deref(), Some("web"));
    }
    assert_eq!(fx.records[0].reason, End::Rejected);
    assert_eq!(fx.events.len(), 3);
    for e in &fx.events {
        assert_eq!(e.agent.as_deref(), Some("claude-code/1.0"));
        assert_eq!(e.project.as_deref(), Some("web"));
        assert!(!serde_json::to_string(e).unwrap().contains("secret"));
    }
}

/// A replay step of at most `n` frames, unbounded in bytes.
fn step(n: usize) -> ReplayBudget {
    ReplayBudget {
        frames: n,
        bytes: usize::MAX,
        room: usize::MAX,
    }
}

#[test]
fn a_replay_step_is_bounded_in_bytes_and_a_large_first_frame_waits_for_room() {
    let mut b = broker();
    let mut fx = Effects::default();
    let t0 = Instant::now();
    for i in 0..3 {
        b.ask(PRODUCER, request(&format!("r{i}"), json!({})), t0, &mut fx);
    }
    b.subscribe(UI_A, None, SubscribeFilter::default(), &mut fx);
    sent(&mut fx);
    // A budget of one byte: each step sends its first frame alone (it fits the room).
    let one = ReplayBudget {
        frames: 64,
        bytes: 1,
        room: usize::MAX,
    };
    assert_eq!(b.replay(UI_A, one, t0, &mut fx), ReplayStep::More);
    assert_eq!(sent(&mut fx).len(), 1);
    // No room for the next frame: nothing sent, the UI still catching up.
    let full = ReplayBudget { room: 1, ..one };
    assert_eq!(b.replay(UI_A, full, t0, &mut fx), ReplayStep::Blocked);
    assert!(sent(&mut fx).is_empty());
    assert_eq!(b.replay(UI_A, one, t0, &mut fx), ReplayStep::More);
    assert_eq!(b.replay(UI_A, one, t0, &mut fx), ReplayStep::Done);
    assert_eq!(sent(&mut fx).len(), 2);
}
