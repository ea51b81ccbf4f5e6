//! The replay a UI gets when it subscribes fits its queue by construction, counted in bytes
//! (issue 27 item 10): one user's large pending questions never cut another's UIs off, and a
//! single frame near the queue's limit is delayed until the queue drains, never refused.
//! Through the real daemon over its real socket.

use crate::harness as common;

use std::time::{Duration, Instant};

use common::{Daemon, Raw};
use serde_json::json;

/// A question whose frame is about `bytes` long.
fn big_request(id: &str, bytes: usize) -> serde_json::Value {
    json!({
        "type": "ask-user-request",
        "correlationId": id,
        "questions": [{
            "question": "x".repeat(bytes),
            "header": "Big",
            "type": "text"
        }]
    })
}

/// Asks `n` questions of about `bytes` each and waits until askbusd holds them all.
async fn ask_many(d: &Daemon, n: usize, bytes: usize) -> Raw {
    let mut p = d.connect().await;
    for i in 0..n {
        p.send(big_request(&format!("big-{i}"), bytes)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = d.connect().await;
        s.send(json!({"type": "stats"})).await;
        let stats = s.recv_type("stats").await;
        if stats["pending"] == n {
            return p;
        }
        assert!(Instant::now() < deadline, "never {n} pending: {stats}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Subscribes and reads the whole replay: every request, and the connection still open.
async fn replayed(d: &Daemon, n: usize) {
    let (mut ui, pending) = d.ui().await;
    assert_eq!(pending, n as u64);
    for i in 0..n {
        let frame = ui.recv().await;
        assert_eq!(
            frame["type"],
            "ask-user-request",
            "frame {i} of the replay: {}",
            &frame.to_string()[..200.min(frame.to_string().len())]
        );
    }
    ui.ping().await;
}

#[test]
fn a_replay_larger_than_the_queue_reaches_the_ui_whole() {
    // 12 questions of 900 KB: 10.8 MB, over the 8 MiB queue, within the 64 MiB budget.
    let d = Daemon::start();
    common::rt().block_on(async {
        let _p = ask_many(&d, 12, 900_000).await;
        replayed(&d, 12).await;
        // Again, with another UI already connected: the first is not cut either.
        let (mut first, _) = d.ui().await;
        replayed(&d, 12).await;
        for _ in 0..12 {
            assert_eq!(first.recv().await["type"], "ask-user-request");
        }
        first.ping().await;
    });
    assert!(
        !d.log_text().contains("overflow"),
        "no UI was cut: {}",
        d.log_text()
    );
}

#[test]
fn a_frame_near_the_queue_limit_waits_for_room_and_is_not_starved() {
    // Each frame is three quarters of the queue: never two at once, always one after another.
    let d = Daemon::start_with(&["--max-queue-bytes", "1200000"]);
    common::rt().block_on(async {
        let _p = ask_many(&d, 4, 900_000).await;
        replayed(&d, 4).await;
    });
    assert!(!d.log_text().contains("overflow"), "{}", d.log_text());
}
