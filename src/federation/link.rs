//! The hub's end of federation: the bounded queue the broker's federation effects go into,
//! and the state the federation task reports (`stats`, metrics, `STATUS=`). A layer of its own
//! so the hub needs nothing of the task that reads the queue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::broker::FedOut;
use crate::protocol::{ErrorCode, FrameError};

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
        })
    }
}

/// The broker's end of the queue to the federation task. One item is what one broker
/// operation asked of federation: a shutdown's thousands of ends take one slot, so the queue
/// bounds operations and a burst never overflows it into a resync that could not tell why
/// each question ended.
pub struct FedLink {
    tx: mpsc::Sender<Vec<FedOut>>,
    /// Set when a share or an end did not fit: the task republishes and reconciles.
    resync: Arc<AtomicBool>,
    pub status: Arc<FedStatus>,
}

impl FedLink {
    /// Queues `outs` without waiting; returns them if they did not fit.
    pub fn send(&self, outs: Vec<FedOut>) -> Option<Vec<FedOut>> {
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
        resync: Arc<AtomicBool>,
        status: Arc<FedStatus>,
    ) -> Self {
        FedLink { tx, resync, status }
    }
}
