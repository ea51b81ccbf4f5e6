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

/// The broker's end of the queue to the federation task.
pub struct FedLink {
    tx: mpsc::Sender<FedOut>,
    /// Set when a share or an end did not fit: the task republishes and reconciles.
    resync: Arc<AtomicBool>,
    pub status: Arc<FedStatus>,
}

impl FedLink {
    /// Queues `out` without waiting; returns it if it did not fit.
    pub fn send(&self, out: FedOut) -> Option<FedOut> {
        match self.tx.try_send(out) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(out) | mpsc::error::TrySendError::Closed(out)) => {
                if !matches!(out, FedOut::Forward(_)) {
                    self.resync.store(true, Ordering::Relaxed);
                }
                Some(out)
            }
        }
    }
}

impl FedLink {
    pub fn new(tx: mpsc::Sender<FedOut>, resync: Arc<AtomicBool>, status: Arc<FedStatus>) -> Self {
        FedLink { tx, resync, status }
    }
}
