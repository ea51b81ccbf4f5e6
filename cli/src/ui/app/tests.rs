//! The app's state changes on bus events and keys.

use super::*;
use askbus::protocol::ProducerInfo;
use serde_json::json;

fn req(id: &str) -> UiRequest {
    UiRequest {
        correlation_id: id.into(),
        questions: json!([{"question": "Pick", "header": "H", "type": "choice",
            "options": [{"label": "A", "description": ""}, {"label": "B", "description": ""}]}]),
        timeout_ms: 60_000,
        producer: ProducerInfo {
            client: Some(format!("agent-{id}")),
            pid: Some(7),
            uid: 0,
        },
        context: None,
        node: None,
    }
}

fn answer0(app: &App) -> Option<String> {
    match &app.open_entry().unwrap().ask {
        Ask::Question { dialog, .. } => dialog.answer(0),
        Ask::Approval { .. } => panic!("a question was expected"),
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn connected(pending: u64) -> App {
    let mut app = App::new();
    app.on_connected(pending);
    app
}

fn arrive(app: &mut App, id: &str) {
    app.on_event(UiEvent::Request(req(id)), Instant::now());
}

#[test]
fn first_arrival_opens_later_ones_wait() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    assert_eq!(app.view, View::Dialog("a".into()));
    app.on_key(key(KeyCode::Char('x')));
    arrive(&mut app, "b");
    // The half-typed answer keeps the focus.
    assert_eq!(app.view, View::Dialog("a".into()));
    assert_eq!(answer0(&app).as_deref(), Some("x"));
    assert_eq!(app.entries.len(), 2);
}

#[test]
fn answering_sends_and_moves_on() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    arrive(&mut app, "b");
    arrive(&mut app, "c");
    let action = app.on_key(key(KeyCode::Char('2')));
    assert_eq!(
        action,
        Some(Action::Answer {
            id: "a".into(),
            answers: [(0, "B".to_owned())].into()
        })
    );
    // Two left: the list, oldest first.
    assert_eq!(app.view, View::List);
    assert_eq!(app.entries[0].id(), "b");
    app.on_event(
        UiEvent::Ack {
            correlation_id: "a".into(),
            outcome: AckOutcome::Answered,
        },
        Instant::now(),
    );
    assert!(app.notice.as_ref().unwrap().text.contains("agent-a"));
    app.on_key(key(KeyCode::Char('2')));
    assert_eq!(app.view, View::Dialog("c".into()));
    assert_eq!(
        app.on_key(key(KeyCode::Esc)),
        Some(Action::Dismiss { id: "c".into() })
    );
    // One left: opened directly.
    assert_eq!(app.view, View::Dialog("b".into()));
}

#[test]
fn withdrawal_on_screen_closes_with_the_reason() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_event(
        UiEvent::Withdrawn {
            correlation_id: "a".into(),
            reason: WithdrawReason::Timeout,
        },
        Instant::now(),
    );
    assert_eq!(app.view, View::List);
    assert!(app.entries.is_empty());
    let n = app.notice.clone().unwrap();
    assert_eq!(
        n.text,
        "Closed: question from agent-a (pid 7) — it timed out"
    );
}

#[test]
fn nothing_is_sent_while_disconnected() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_down("gone".into(), Duration::from_secs(1), Instant::now());
    assert_eq!(app.on_key(key(KeyCode::Char('1'))), None);
    assert_eq!(app.view, View::Dialog("a".into()));
}

#[test]
fn replay_keeps_what_survived_and_drops_the_rest() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    arrive(&mut app, "b");
    app.on_key(key(KeyCode::Char('z')));
    app.on_down("gone".into(), Duration::from_secs(1), Instant::now());
    assert!(app.entries.iter().all(|e| e.stale));
    app.on_connected(2);
    arrive(&mut app, "b");
    arrive(&mut app, "c");
    // "a" was open and is gone; "b" and "c" remain, so the list shows.
    let ids: Vec<_> = app.entries.iter().map(|e| e.id().to_owned()).collect();
    assert_eq!(ids, ["b", "c"]);
    assert_eq!(app.view, View::List);
    assert!(app.notice.unwrap().text.contains("no longer has it"));
}

#[test]
fn replay_of_the_open_request_keeps_its_typing() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_key(key(KeyCode::Char('z')));
    app.on_down("gone".into(), Duration::ZERO, Instant::now());
    app.on_connected(1);
    arrive(&mut app, "a");
    assert_eq!(app.view, View::Dialog("a".into()));
    assert_eq!(answer0(&app).as_deref(), Some("z"));
    assert!(!app.open_entry().unwrap().stale);
}

#[test]
fn list_keys_and_back_to_list() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    arrive(&mut app, "b");
    let ctrl_l = KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(ctrl_l), None);
    assert_eq!(app.view, View::List);
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.view, View::Dialog("b".into()));
    app.on_key(ctrl_l);
    assert_eq!(app.list_cursor, 1);
    assert_eq!(app.on_key(key(KeyCode::Char('q'))), Some(Action::Quit));
}

#[test]
fn a_losing_answer_says_so() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_key(key(KeyCode::Char('1')));
    app.on_event(
        UiEvent::Error(ErrorFrame {
            code: "not-pending".into(),
            message: "x".into(),
            correlation_id: Some("a".into()),
        }),
        Instant::now(),
    );
    let n = app.notice.unwrap();
    assert_eq!(n.tone, Tone::Bad);
    assert!(n.text.contains("already answered"));
}

fn approval(id: &str, outcomes: &[&str]) -> Box<askbus::protocol::UiApproval> {
    Box::new(
        serde_json::from_value(json!({"correlationId": id,
            "toolCall": {"name": "run_shell_command"},
            "details": {"type": "exec", "title": "Confirm", "command": "make",
                        "rootCommand": "make", "rootCommands": ["make"]},
            "outcomes": outcomes, "timeoutMs": 60_000,
            "producer": {"client": format!("agent-{id}"), "pid": 7, "uid": 0}}))
        .unwrap(),
    )
}

fn arrive_approval(app: &mut App, id: &str) {
    app.on_event(
        UiEvent::Approval(approval(id, &["proceed_once", "cancel"])),
        Instant::now(),
    );
}

#[test]
fn approvals_decide_with_a_reason_and_count_in_the_replay() {
    let mut app = connected(0);
    arrive_approval(&mut app, "a");
    arrive(&mut app, "q");
    assert_eq!(app.view, View::Dialog("a".into()));
    for c in "nope".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    // A reconnect whose replay brings both back keeps the typed reason.
    app.on_down("gone".into(), Duration::ZERO, Instant::now());
    app.on_connected(2);
    arrive(&mut app, "q");
    arrive_approval(&mut app, "a");
    assert_eq!(app.entries.len(), 2);
    assert!(app.entries.iter().all(|e| !e.stale));
    assert_eq!(
        app.on_key(key(KeyCode::Enter)),
        Some(Action::Decide {
            id: "a".into(),
            outcome: ToolOutcome::Cancel,
            message: Some("nope".into()),
            rule: None,
        })
    );
    app.on_event(
        UiEvent::ApprovalAck(askbus::protocol::ApprovalAck {
            correlation_id: "a".into(),
            reason: AckOutcome::Answered,
            confirmed: false,
            outcome: ToolOutcome::Cancel,
        }),
        Instant::now(),
    );
    assert_eq!(
        app.notice.as_ref().unwrap().text,
        "✗ Denied; agent-a (pid 7) was told"
    );
    // The question left opens; an approval arriving now waits.
    assert_eq!(app.view, View::Dialog("q".into()));
    arrive_approval(&mut app, "b");
    assert_eq!(app.view, View::Dialog("q".into()));
    app.on_event(
        UiEvent::ApprovalWithdrawn {
            correlation_id: "b".into(),
            reason: WithdrawReason::Timeout,
        },
        Instant::now(),
    );
    assert_eq!(
        app.notice.as_ref().unwrap().text,
        "Gone: approval from agent-b (pid 7) — it timed out"
    );
}

#[test]
fn an_approval_is_never_sent_while_disconnected_and_esc_dismisses() {
    let mut app = connected(0);
    arrive_approval(&mut app, "a");
    app.on_down("gone".into(), Duration::from_secs(1), Instant::now());
    assert_eq!(app.on_key(key(KeyCode::Char('1'))), None);
    assert_eq!(app.view, View::Dialog("a".into()));
    app.on_connected(1);
    arrive_approval(&mut app, "a");
    assert_eq!(
        app.on_key(key(KeyCode::Esc)),
        Some(Action::DismissApproval { id: "a".into() })
    );
}

fn origin_unreachable(id: &str) -> UiEvent {
    UiEvent::Error(ErrorFrame {
        code: "origin-unreachable".into(),
        message: "the answer was not delivered (this node is not connected to NATS); the \
                  question is still pending"
            .into(),
        correlation_id: Some(id.into()),
    })
}

#[test]
fn an_answer_refused_while_still_pending_brings_the_request_back_as_it_was_left() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    // Pick B, then Enter sends it.
    app.on_key(key(KeyCode::Down));
    let sent = app.on_key(key(KeyCode::Enter));
    assert!(
        matches!(sent, Some(Action::Answer { ref id, .. }) if id == "a"),
        "{sent:?}"
    );
    assert!(app.entries.is_empty());
    app.on_event(origin_unreachable("a"), Instant::now());
    // Back and open again, with the choice the person made.
    assert_eq!(app.entries.len(), 1);
    assert_eq!(app.view, View::Dialog("a".into()));
    let n = app.notice.clone().unwrap();
    assert_eq!(n.tone, Tone::Bad);
    assert!(
        n.text.contains("still pending") && n.text.contains("agent-a"),
        "{}",
        n.text
    );
    assert!(!app.entries.iter().any(|e| e.stale));
    // Retrying sends the same answer again.
    let again = app.on_key(key(KeyCode::Enter));
    assert_eq!(again, sent);
    // A refusal that says it is gone does not bring it back.
    app.on_event(
        UiEvent::Error(ErrorFrame {
            code: "not-pending".into(),
            message: "x".into(),
            correlation_id: Some("a".into()),
        }),
        Instant::now(),
    );
    assert!(app.entries.is_empty());

    // With another request opened meanwhile, it comes back to the list (after its project's
    // others, as a new one would), and the dialog in view stays.
    let mut app = connected(0);
    arrive(&mut app, "a");
    arrive(&mut app, "b");
    app.on_key(key(KeyCode::Char('1')));
    assert_eq!(app.view, View::Dialog("b".into()));
    app.on_event(origin_unreachable("a"), Instant::now());
    assert_eq!(app.view, View::Dialog("b".into()));
    let ids: Vec<&str> = app.entries.iter().map(|e| e.id()).collect();
    assert_eq!(ids, ["b", "a"]);
}

#[test]
fn a_send_that_failed_at_the_socket_keeps_the_request_for_the_replay_to_confirm() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    let sent = app.on_key(key(KeyCode::Char('1')));
    assert!(sent.is_some());
    app.on_down("gone".into(), Duration::from_secs(1), Instant::now());
    app.on_send_failed("a", "broken pipe");
    // Nothing to restore: a lost connection's acks never come, the replay brings it back.
    assert!(app.entries.is_empty());
    assert!(app.notice.as_ref().unwrap().text.contains("broken pipe"));
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_key(key(KeyCode::Char('1')));
    app.on_send_failed("a", "broken pipe");
    assert_eq!(app.entries.len(), 1);
    assert_eq!(app.view, View::Dialog("a".into()));
}

#[test]
fn an_answer_in_flight_when_the_daemon_goes_down_comes_back_as_a_draft_once() {
    let mut app = connected(0);
    arrive(&mut app, "a");
    app.on_key(key(KeyCode::Char('x')));
    // Sent (Enter on the Other row), and the daemon goes down before the ack.
    assert!(matches!(
        app.on_key(key(KeyCode::Enter)),
        Some(Action::Answer { .. })
    ));
    assert!(app.entries.is_empty());
    app.on_down("gone".into(), Duration::ZERO, Instant::now());
    // The restored request is replayed: it comes back with what was typed, once.
    app.on_connected(1);
    arrive(&mut app, "a");
    assert_eq!(app.entries.len(), 1);
    assert_eq!(answer0(&app).as_deref(), Some("x"));
    // A request the replay did not bring back, restored later (live): its draft waits.
    app.on_key(key(KeyCode::Char('y')));
    app.on_down("gone".into(), Duration::ZERO, Instant::now());
    app.on_connected(0);
    assert!(app.entries.is_empty());
    arrive(&mut app, "a");
    assert_eq!(answer0(&app).as_deref(), Some("xy"));
    // Withdrawn: the draft is dropped with it.
    app.on_event(
        UiEvent::Withdrawn {
            correlation_id: "a".into(),
            reason: WithdrawReason::Timeout,
        },
        Instant::now(),
    );
    arrive(&mut app, "a");
    assert_eq!(answer0(&app), None);
}

#[test]
fn h_opens_the_history_over_the_list_and_closes_it() {
    let mut app = connected(0);
    assert_eq!(
        app.on_key(key(KeyCode::Char('h'))),
        Some(Action::LoadHistory)
    );
    assert!(app.history.is_some());
    app.on_history(Err("no store".into()));
    let h = app.history.as_ref().unwrap();
    assert!(h.status.as_deref().unwrap().contains("no store"));
    // Keys go to the history while it is open; r reloads, h closes.
    assert_eq!(app.on_key(key(KeyCode::Char('q'))), None);
    assert!(app.history.is_none());
    app.on_key(key(KeyCode::Char('h')));
    assert_eq!(
        app.on_key(key(KeyCode::Char('r'))),
        Some(Action::LoadHistory)
    );
    assert_eq!(app.on_key(key(KeyCode::Char('h'))), None);
    assert!(app.history.is_none());
}
