//! The `stats` frame (documented in proto/PROTOCOL.md): the broker's counts, the connection
//! counters and federation's status, read under the hub's lock in one moment.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::Hub;
use crate::broker::{PeerId, PeerInfo};
use crate::protocol::{encode, End};
use crate::telemetry::Counters;

impl Hub {
    /// The `stats` answer for `peer`. The daemon-wide counters are for the daemon's own uid,
    /// root and operators; any other uid (admitted by the access rules) is told only about
    /// itself, so it learns nothing of other users' activity (PROTOCOL.md, The stats frame).
    pub fn stats_frame_for(&self, peer: PeerId) -> Bytes {
        let scoped = {
            let inner = self.lock();
            let b = &inner.broker;
            match b.peer_info(peer) {
                Some(info) if !sees_everything(info) => Some((info.uid, b.counts_of_uid(info.uid))),
                _ => None,
            }
        };
        let Some((uid, own)) = scoped else {
            return self.stats_frame();
        };
        encode(&json!({
            "type": "stats",
            "scope": "own",
            "uid": uid,
            "server": crate::SERVER_NAME,
            "node": &*self.node,
            "uptimeMs": self.started.elapsed().as_millis() as u64,
            "connections": own.connections,
            "producers": own.producers,
            "uis": own.uis,
            "pending": own.pending,
        }))
    }

    /// The daemon-wide `stats` frame: live counters, documented in proto/PROTOCOL.md.
    pub fn stats_frame(&self) -> Bytes {
        let c = &self.counters;
        let get = Counters::get;
        let inner = self.lock();
        let b = &inner.broker;
        let s = b.stats();
        let errors: Map<String, Value> = c
            .errors()
            .map(|(code, n)| (code.as_str().to_owned(), json!(n)))
            .collect();
        // Every end of a request that became pending (rejections are counted under requests).
        let outcomes: Map<String, Value> = s
            .ends()
            .filter(|(end, _)| *end != End::Rejected)
            .map(|(end, n)| (end.as_str().to_owned(), json!(n)))
            .collect();
        let frame = json!({
            "type": "stats",
            "server": crate::SERVER_NAME,
            "node": &*self.node,
            "uptimeMs": self.started.elapsed().as_millis() as u64,
            "connections": b.peer_count(),
            "producers": b.producer_count(),
            "uis": b.ui_count(),
            "pending": b.pending_len(),
            "connectionsTotal": get(&c.connections_total),
            "connectionsRefused": get(&c.connections_refused),
            "requests": {
                "accepted": s.accepted,
                "rejected": s.rejected(),
                "resolved": s.resolved(),
            },
            "outcomes": outcomes,
            "latencyMs": {
                "count": s.latency_count(),
                "p50": s.latency_ms(0.5),
                "p90": s.latency_ms(0.9),
                "p99": s.latency_ms(0.99),
                "max": s.latency_max_ms(),
            },
            "approvals": approval_stats(&s.approvals),
            "errors": errors,
            "framesIn": get(&c.frames_in),
            "framesOut": get(&c.frames_out),
            "queueOverflows": get(&c.queue_overflows),
            "telemetryLines": get(&c.telemetry_lines),
            "telemetryErrors": get(&c.telemetry_errors),
        });
        let mut frame = frame;
        // Who is subscribed on this node (a federated node's UIs are not: they count on
        // their own node), what decides before them, and where decisions are kept: what
        // `askbus doctor` reports.
        frame["subscribers"] = b
            .ui_peers()
            .map(|p| {
                json!({
                    "client": p.info.client,
                    "via": p.via.as_deref().unwrap_or("client"),
                    "pid": p.info.pid,
                    "uid": p.info.uid,
                })
            })
            .collect();
        frame["policies"] = match b.policy() {
            Some(set) => json!({"enabled": true, "errors": set.errors()}),
            None => json!({"enabled": false}),
        };
        frame["store"] = match &inner.gate {
            Some(gate) => json!({
                "enabled": true,
                "path": gate.store.path(),
                "available": gate.store.available.load(std::sync::atomic::Ordering::Relaxed),
                "brokenChain": gate.store.broken_chain,
            }),
            None => json!({"enabled": false}),
        };
        if let Some(link) = &inner.fed {
            let (remote, shared) = b.federated_counts();
            frame["federation"] = link.status.to_json(remote, shared);
        }
        encode(&frame)
    }
}

/// The `approvals` object of the stats frame: approvals alone, by reason and decision.
fn approval_stats(a: &crate::broker::ApprovalStats) -> Value {
    let outcomes: Map<String, Value> = a
        .ends()
        .filter(|(end, _)| *end != End::Rejected)
        .map(|(end, n)| (end.as_str().to_owned(), json!(n)))
        .collect();
    let decisions: Map<String, Value> = a
        .decisions()
        .map(|(o, n)| (o.as_str().to_owned(), json!(n)))
        .collect();
    json!({
        "requests": {
            "accepted": a.accepted,
            "rejected": a.ended(End::Rejected),
            "resolved": a.resolved(),
        },
        "outcomes": outcomes,
        "decisions": decisions,
        "confirmed": a.confirmed,
        "latencyMs": {
            "count": a.latency_count(),
            "p50": a.latency_ms(0.5),
            "p90": a.latency_ms(0.9),
            "p99": a.latency_ms(0.99),
            "max": a.latency_max_ms(),
        },
    })
}

/// Whether a peer may see the daemon's counters for everyone: the daemon's own uid, root, or
/// an operator.
fn sees_everything(info: &PeerInfo) -> bool {
    let own_uid = nix::unistd::geteuid().as_raw();
    info.rights.operator || info.uid == 0 || info.uid == own_uid
}
