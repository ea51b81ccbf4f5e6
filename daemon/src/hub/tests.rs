//! The hub with real outboxes: deadlines expire on time and frames reach the peers.

use serde_json::{json, Value};
use tokio::time::Duration;

use super::*;
use crate::broker::Valid;
use crate::protocol::RequestKind;
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

fn request(id: &str, timeout_ms: u64) -> Valid {
    let frame = json!({"type": "ask-user-request", "correlationId": id, "timeoutMs": timeout_ms,
        "questions": [{"question": "Q?", "header": "H", "type": "text"}]});
    crate::intake::read_remote(frame.to_string().as_bytes(), RequestKind::Question).unwrap()
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

/// The own-scope stats have exactly the shape of proto/examples/server/stats.own.json and
/// count only the asking uid's share; the daemon's uid and operators get the full frame.
#[tokio::test]
async fn stats_for_another_uid_count_only_its_own_share() {
    let hub = Hub::new(
        Limits::default(),
        TelemetrySink::disabled(),
        Arc::default(),
        "t",
    );
    let other = 4_000_123;
    let peer = |uid, operator| PeerInfo {
        uid,
        rights: Rights {
            produce: true,
            ui: true,
            operator,
        },
        ..PeerInfo::default()
    };
    let mut keep = Vec::new();
    for (id, info) in [
        (1, peer(other, false)),
        (2, peer(other + 1, false)),
        (3, peer(other + 2, true)),
        (4, peer(nix::unistd::geteuid().as_raw(), false)),
    ] {
        let (ours, theirs) = UnixStream::pair().unwrap();
        hub.connect(id, info, Outbox::new(Arc::new(ours), 1 << 20));
        keep.push(theirs);
    }
    hub.run(|b, now, fx| b.ask(2, request("theirs", 60_000), now, fx));
    let own: Value = serde_json::from_slice(&hub.stats_frame_for(1)).unwrap();
    let example: Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../proto/examples/server/stats.own.json"
    )))
    .unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let (mut a, mut b) = (keys(&own), keys(&example));
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(
        (own["uid"].as_u64(), own["connections"].as_u64()),
        (Some(other as u64), Some(1))
    );
    assert_eq!(
        (own["pending"].as_u64(), own["producers"].as_u64()),
        (Some(0), Some(0))
    );
    let asker: Value = serde_json::from_slice(&hub.stats_frame_for(2)).unwrap();
    assert_eq!(
        (asker["pending"].as_u64(), asker["producers"].as_u64()),
        (Some(1), Some(1))
    );
    for full in [3, 4] {
        let v: Value = serde_json::from_slice(&hub.stats_frame_for(full)).unwrap();
        assert!(
            v.get("scope").is_none() && v["pending"] == 1 && v["connections"] == 4,
            "{v}"
        );
    }
}
