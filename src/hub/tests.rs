//! The hub with real outboxes: deadlines expire on time and frames reach the peers.

use serde_json::{json, Value};
use tokio::time::Duration;

use super::*;
use crate::broker::ValidRequest;
use crate::protocol::{parse_inbound, Inbound};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

fn request(id: &str, timeout_ms: u64) -> ValidRequest {
    let frame = json!({"type": "ask-user-request", "correlationId": id, "timeoutMs": timeout_ms,
        "questions": [{"question": "Q?", "header": "H", "type": "text"}]});
    let Inbound::AskUserRequest(req) = parse_inbound(frame.to_string().as_bytes()).unwrap() else {
        panic!()
    };
    ValidRequest::check(req).unwrap()
}

async fn next_frame(peer: &mut UnixStream) -> Value {
    let len = peer.read_u32().await.unwrap() as usize;
    let mut payload = vec![0; len];
    peer.read_exact(&mut payload).await.unwrap();
    serde_json::from_slice(&payload).unwrap()
}

#[tokio::test(start_paused = true)]
async fn one_timer_expires_each_deadline_when_due() {
    let hub = Arc::new(Hub::new(
        Limits::default(),
        TelemetrySink::disabled(),
        Arc::default(),
        "test",
    ));
    let (ours, mut peer) = UnixStream::pair().unwrap();
    hub.connect(1, PeerInfo::default(), Outbox::new(Arc::new(ours), 1 << 20));
    let stop = CancellationToken::new();
    let timer = tokio::spawn({
        let (hub, stop) = (hub.clone(), stop.clone());
        async move { hub.run_timer(stop).await }
    });
    let t0 = Instant::now();
    hub.run(|b, now, fx| b.ask(1, request("late", 10_000), now, fx));
    // An earlier deadline added while the timer sleeps towards a later one wakes it.
    tokio::time::sleep(Duration::from_millis(10)).await;
    hub.run(|b, now, fx| b.ask(1, request("soon", 1_000), now, fx));
    let soon = next_frame(&mut peer).await;
    assert_eq!(soon["correlationId"], "soon");
    assert_eq!(soon["reason"], "timeout");
    let at = t0.elapsed();
    assert!(
        at >= Duration::from_millis(1010) && at < Duration::from_millis(1020),
        "{at:?}"
    );
    let late = next_frame(&mut peer).await;
    assert_eq!(late["correlationId"], "late");
    assert!(t0.elapsed() >= Duration::from_millis(10_000));
    stop.cancel();
    timer.await.unwrap();
}
