//! `askbus ui` across a restart of a daemon on a store (issue 28): the pending questions it
//! showed are restored and replayed, and each is shown once (not once per connection), and the
//! answer given after the restart reaches the producer that re-attached.

use crate::harness::{Daemon, Raw};
use crate::pty::Pty;

use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_request_is_shown_once_after_a_sigkill() {
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("askbus.db");
    let mut daemon = Daemon::start_with(&["--store", store.to_str().unwrap()]);
    let ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("● connected").await;
    let ask = |id: &str, text: &str| {
        json!({"type": "ask-user-request", "correlationId": id,
            "questions": [{"question": text, "header": "Ping", "type": "yesno"}]})
    };
    let mut p = Raw::connect(&daemon.socket).await;
    p.send(ask("s1", "First still there?")).await;
    p.send(ask("s2", "Second still there?")).await;
    ui.wait_for("2 questions pending").await;
    daemon.kill();
    ui.wait_for("✗ disconnected").await;
    daemon.restart();
    ui.wait_for("Reconnected to askbusd").await;
    // Replayed, not added beside what it showed before the crash (the count after one
    // answer, below, says the same: 1, not 3).
    let screen = ui.wait_for("2 questions pending").await;
    assert!(!screen.contains("4 questions pending"), "{screen}");
    // The producer re-attaches; the person answers the dialog in front of them.
    let mut p = Raw::connect(&daemon.socket).await;
    p.send(ask("s1", "First still there?")).await;
    p.send(ask("s2", "Second still there?")).await;
    p.send(json!({"type": "ping", "id": "sync"})).await;
    p.recv_type("pong").await;
    let mut ui = ui;
    ui.keys("1");
    let r = p.recv_type("ask-user-response").await;
    assert_eq!(r["answers"]["0"], "Yes", "{r}");
    let screen = ui.wait_for("1 question pending").await;
    assert!(!screen.contains("2 questions pending"), "{screen}");
}
