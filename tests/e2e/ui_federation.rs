//! `askbus ui` on a federated node, in a pseudo-terminal, through a NATS outage: a question
//! asked on another node, whose answer cannot reach its origin while the server is down,
//! stays on screen with the whole reason (wrapped, not cut), and is answered once it is back.

use std::time::Duration;

use serde_json::json;

use crate::harness::nats::{fed_stats, node, wait_sees, Nats};
use crate::harness::{choice_request, rt, RECV_TIMEOUT};
use crate::pty::{self, Pty};

/// The screen's words, one space apart: text wrapped over rows reads as one line.
fn words(screen: &str) -> String {
    screen.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_remote_question_whose_answer_fails_in_a_nats_outage_stays_with_the_whole_reason() {
    let mut nats = Nats::start();
    rt().block_on(async {
        let url = nats.url();
        let a = node(&url, "A", "");
        let b = node(&url, "B", "");
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        let mut ui = Pty::askbus(&["ui", "--socket", b.socket.to_str().unwrap()]);
        ui.wait_for("● connected").await;
        let mut producer = a.connect().await;
        producer
            .send(json!({"type": "hello", "protocol": 1, "client": "agent/1"}))
            .await;
        producer.recv_type("welcome").await;
        producer.send(choice_request("out-1")).await;
        ui.wait_for("Which database?").await;

        nats.kill();
        let deadline = std::time::Instant::now() + RECV_TIMEOUT * 2;
        while fed_stats(&b).await["connected"] == true {
            assert!(
                std::time::Instant::now() < deadline,
                "B never noticed NATS was gone"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ui.keys(pty::DOWN);
        ui.wait_for("● 2. PostgreSQL").await;
        ui.keys(pty::ENTER);
        let screen = ui
            .wait_until("the refusal's whole reason", |s| {
                words(s).contains("the question is still pending")
            })
            .await;
        let text = words(&screen);
        assert!(
            text.contains("✗ Not delivered to agent/1 (pid ",)
                && text.contains(
                    " on A): the answer was not delivered (this node is not connected to NATS); \
                 the question is still pending (kept here to try again)"
                ),
            "the whole reason, wrapped:\n{screen}"
        );
        // Still on screen, open, with the person's choice.
        assert!(screen.contains("Which database?"), "{screen}");
        assert!(screen.contains("● 2. PostgreSQL"), "{screen}");
        assert!(screen.contains("1 question pending"), "{screen}");
        producer.expect_silence(Duration::from_millis(100)).await;

        // NATS back: the same key answers it.
        nats.restart();
        wait_sees(&a, &["B"]).await;
        wait_sees(&b, &["A"]).await;
        ui.keys(pty::ENTER);
        let r = producer.recv_type("ask-user-response").await;
        assert_eq!(r["correlationId"], "out-1");
        assert_eq!(r["answers"]["0"], "PostgreSQL");
        ui.wait_for("✓ Answer delivered to agent/1").await;
        ui.wait_for("No questions pending.").await;
    });
}
