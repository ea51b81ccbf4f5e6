//! The hub's end of federation: the bounded queue the broker's federation effects go into,
//! and the state the federation task reports (`stats`, metrics, `STATUS=`). A layer of its own
//! so the hub needs nothing of the task that reads the queue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::broker::FedOut;
use crate::protocol::{ErrorCode, FrameError};

/// The federation protocol version this node speaks (proto/PROTOCOL.md, "Federation"): v1 was
/// the JetStream KV layout, v2 the core-NATS subjects.
pub const PROTOCOL: u64 = 2;

/// The error a UI gets for an answer that cannot reach its origin.
pub fn unreachable(id: &str, why: &str) -> FrameError {
    FrameError::new(
        ErrorCode::OriginUnreachable,
        format!("the answer was not delivered ({why}); the question is still pending"),
    )
    .with_id(Some(id))
}

/// Federation state for `stats`, the metrics and `STATUS=`.
#[derive(Debug, Default)]
pub struct FedStatus {
    pub node: String,
    pub connected: AtomicBool,
    pub reconnects: AtomicU64,
    pub rtt_us: AtomicU64,
    pub forwarded: AtomicU64,
    pub forward_errors: AtomicU64,
    /// What other nodes sent that this node refused: answers of the wrong shape (a JetStream
    /// delivery, a reply outside the sender's inbox) and remote questions over its limits.
    pub refused: AtomicU64,
    /// Refusals by the server of this node's own subjects (wrong credentials for its name).
    pub denied: AtomicU64,
    /// Catch-ups: how often this node fetched another's pending through `P.sync`.
    pub syncs: AtomicU64,
    pub nodes: Mutex<Vec<String>>,
}

impl FedStatus {
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    pub fn nodes(&self) -> Vec<String> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn to_json(&self, remote_pending: usize, shared_pending: usize) -> Value {
        json!({
            "connected": self.connected(),
            "node": self.node,
            "nodes": self.nodes(),
            "remotePending": remote_pending,
            "sharedPending": shared_pending,
            "rttUs": self.rtt_us.load(Ordering::Relaxed),
            "reconnects": self.reconnects.load(Ordering::Relaxed),
            "forwarded": self.forwarded.load(Ordering::Relaxed),
            "forwardErrors": self.forward_errors.load(Ordering::Relaxed),
            "refused": self.refused.load(Ordering::Relaxed),
            "denied": self.denied.load(Ordering::Relaxed),
            "syncs": self.syncs.load(Ordering::Relaxed),
            "protocol": PROTOCOL,
        })
    }
}

/// The broker's end of the queue to the federation task. One item is what one broker
/// operation asked of federation: a shutdown's thousands of ends take one slot, so the queue
/// bounds operations and a burst never overflows it into a resync that could not tell why
/// each question ended. Its bound is the pending limit plus room for ends: a burst of shares
/// the limits allow always fits.
pub struct FedLink {
    tx: mpsc::Sender<Vec<FedOut>>,
    /// Slots an answer to forward must leave free for shares and ends.
    shares_room: usize,
    /// Set when a share or an end did not fit: the task republishes and reconciles.
    resync: Arc<AtomicBool>,
    pub status: Arc<FedStatus>,
}

impl FedLink {
    /// Queues `outs` without waiting; returns them if they did not fit.
    pub fn send(&self, outs: Vec<FedOut>) -> Option<Vec<FedOut>> {
        // Answers never crowd out shares and ends: past the room kept for those, a UI is told
        // at once that its answer could not go (rather than waiting behind a backlog).
        if self.tx.capacity() <= self.shares_room
            && outs.iter().any(|o| matches!(o, FedOut::Forward(_)))
        {
            return Some(outs);
        }
        match self.tx.try_send(outs) {
            Ok(()) => None,
            Err(
                mpsc::error::TrySendError::Full(outs) | mpsc::error::TrySendError::Closed(outs),
            ) => {
                if outs.iter().any(|o| !matches!(o, FedOut::Forward(_))) {
                    self.resync.store(true, Ordering::Relaxed);
                }
                Some(outs)
            }
        }
    }
}

impl FedLink {
    pub fn new(
        tx: mpsc::Sender<Vec<FedOut>>,
        shares_room: usize,
        resync: Arc<AtomicBool>,
        status: Arc<FedStatus>,
    ) -> Self {
        FedLink {
            tx,
            shares_room,
            resync,
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::broker::{Answer, Forward, SharedEnd};
    use crate::protocol::{AskUserResponse, UiInfo};

    fn end(id: &str) -> Vec<FedOut> {
        vec![FedOut::Ended(SharedEnd {
            id: id.into(),
            reason: crate::protocol::End::Withdrawn,
            answered_by: None,
            winner_peer: None,
        })]
    }

    fn forward(id: &str) -> Vec<FedOut> {
        vec![FedOut::Forward(Forward {
            ui: 7,
            origin: "b".into(),
            response: Answer::Question(AskUserResponse {
                correlation_id: id.into(),
                answers: BTreeMap::from([(0, "Yes".into())]),
                cancelled: false,
                user: None,
            }),
            by: UiInfo {
                client: None,
                pid: None,
                node: None,
            },
        })]
    }

    #[test]
    fn answers_leave_the_room_for_shares_and_ends_and_only_those_overflowing_ask_a_resync() {
        let (tx, mut rx) = mpsc::channel(4);
        let resync = Arc::new(AtomicBool::new(false));
        let link = FedLink::new(tx, 2, resync.clone(), Arc::default());
        assert!(link.send(forward("q1")).is_none());
        assert!(link.send(end("q2")).is_none());
        // Two slots left, both kept for shares and ends: an answer is refused at once, and
        // that is not a reason to republish everything.
        assert!(link.send(forward("q3")).is_some());
        assert!(!resync.load(Ordering::Relaxed));
        assert!(link.send(end("q4")).is_none());
        assert!(link.send(end("q5")).is_none());
        // Full: an end that does not fit asks the task to reconcile.
        assert!(link.send(end("q6")).is_some());
        assert!(resync.load(Ordering::Relaxed));
        // Drained, answers go again.
        for _ in 0..4 {
            rx.try_recv().unwrap();
        }
        assert!(link.send(forward("q7")).is_none());
    }
}
