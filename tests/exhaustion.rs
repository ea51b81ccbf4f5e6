//! Resource exhaustion: peers that trickle or stall mid-frame are cut at the partial-frame
//! deadline, running out of file descriptors makes accept back off instead of failing, and
//! none of it disturbs well-behaved peers.

mod common;

use std::time::{Duration, Instant};

use common::{answer, choice_request, Daemon};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_trickles_or_stalls_is_cut_at_the_deadline() {
    let d = Daemon::start_with(&["--frame-timeout-ms", "400"]);
    let mut bystander = d.connect().await;

    // Slowloris: a byte every 100 ms never completes a 100-byte frame in time.
    let mut slow = d.connect().await;
    let started = Instant::now();
    slow.send_raw(&100u32.to_be_bytes()).await;
    let mut cut = false;
    for _ in 0..40 {
        if slow.try_send_raw(b" ").await.is_err() {
            break;
        }
        if let Some(f) = slow.recv_within(Duration::from_millis(100)).await {
            assert_eq!(f["code"], "frame-timeout", "{f}");
            cut = true;
            break;
        }
    }
    assert!(cut, "the trickling peer was never cut");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(390) && took < Duration::from_secs(3),
        "{took:?}"
    );
    slow.expect_closed().await;

    // Stopping halfway through a frame.
    let mut stalled = d.connect().await;
    let frame = json!({"type": "ping"}).to_string();
    stalled.send_raw(&(frame.len() as u32).to_be_bytes()).await;
    stalled.send_raw(&frame.as_bytes()[..5]).await;
    let e = stalled.recv_error("frame-timeout").await;
    assert!(e["message"].as_str().unwrap().contains("400 ms"));
    stalled.expect_closed().await;

    // A split header is a started frame too.
    let mut half_header = d.connect().await;
    half_header.send_raw(&[0, 0]).await;
    half_header.recv_error("frame-timeout").await;

    // An idle connection between frames is never cut, and frames split across writes are fine.
    let mut idle = d.connect().await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let ping = json!({"type": "ping", "id": 1}).to_string();
    let mut bytes = (ping.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(ping.as_bytes());
    for chunk in bytes.chunks(3) {
        idle.send_raw(chunk).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(idle.recv_type("pong").await["id"], 1);
    bystander.ping().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_accept_backs_off_and_recovers() {
    let d = Daemon::start_limited(&["--no-telemetry"], Some(48));
    let (mut ui, _) = d.ui().await;
    let mut producer = d.connect().await;
    // Far more connections than the daemon has descriptors for.
    let mut hogs = Vec::new();
    for _ in 0..80 {
        hogs.push(
            tokio::net::UnixStream::connect(&d.socket)
                .await
                .expect("the kernel queues it"),
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Connections already served keep working.
    producer.send(choice_request("during")).await;
    ui.recv_type("ask-user-request").await;
    ui.send(answer("during", json!({"0": "SQLite"}))).await;
    assert_eq!(
        producer.recv_type("ask-user-response").await["reason"],
        "answered"
    );
    drop(hogs);
    // Once descriptors are free, new connections are served again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = d.connect().await;
        c.send(json!({"type": "ping"})).await;
        if c.recv_within(Duration::from_secs(2))
            .await
            .is_some_and(|f| f["type"] == "pong")
        {
            break;
        }
        assert!(Instant::now() < deadline, "never recovered");
    }
    assert!(
        d.log_text().contains("accept failed; backing off"),
        "{}",
        d.log_text()
    );
    let mut d = d;
    assert!(d.is_running(), "the daemon survived");
}
