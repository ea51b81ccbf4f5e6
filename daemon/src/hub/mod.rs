//! The hub: the broker behind one lock, each connection's outbox, the timer that expires
//! deadlines, and handing freed memory back to the OS once the daemon is quiet. Effects are
//! queued on outboxes while the lock is held, so every peer receives frames in the order the
//! broker decided them; delivery never awaits (a full outbox disconnects its peer instead), and
//! the sockets are written after the lock is released, once per batch. Delivering an
//! operation's effects is `deliver`, the `stats` frame is built in `stats`, the memory trimmer
//! lives in `trim`, and the hub's end of the federation link is `federation`.

mod deliver;
pub(crate) mod federation;
mod stats;
mod trim;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::broker::{
    Broker, Effects, FedOut, FedPolicy, Limits, Msg, PeerId, PeerInfo, Rights, Snapshot,
};
use crate::metrics::{FedSummary, Metrics};
use crate::outbox::{Batch, Outbox};
use crate::protocol::{encode, ErrorCode, ServerFrame};
use crate::store::{Clock, Store};
use crate::telemetry::{timestamp, Counters, TelemetrySink};
use deliver::replay_step;
use federation::FedLink;

pub use trim::QUIET_BEFORE_TRIM;

struct Inner {
    broker: Broker,
    outboxes: HashMap<PeerId, Outbox>,
    /// Reused across operations so the hot path does not allocate effect vectors.
    fx: Effects,
    /// The deadline the timer task is sleeping towards.
    armed: Option<Instant>,
    /// Where federation effects go, when federated.
    fed: Option<FedLink>,
    /// With a store: the frames waiting for their operation's writes to commit.
    gate: Option<Gate>,
}

/// The commit point: an operation's frames go out only once the store has committed the
/// writes of that operation and of every one before it (so a UI never sees a request that is
/// not stored, and a UI is never acked for an answer that is not). Frames wait here in order;
/// an operation that writes nothing still waits behind those that do, so every peer keeps
/// receiving frames in the order the broker decided them.
struct Gate {
    store: Arc<Store>,
    /// The last operation group handed to the store, and the last it committed.
    submitted: u64,
    committed: u64,
    held: VecDeque<(u64, PeerId, Bytes)>,
}

/// Everything connections share.
pub struct Hub {
    inner: Mutex<Inner>,
    timer: Notify,
    /// Broker operations so far, when the last one was (ms since `started`), and a wake-up
    /// for the trimmer after each.
    activity: AtomicU64,
    last_active_ms: AtomicU64,
    active: Notify,
    pub counters: Arc<Counters>,
    /// The Prometheus registry; the answer-latency histogram is fed here, as answers end.
    pub metrics: Metrics,
    telemetry: TelemetrySink,
    node: Arc<str>,
    started: Instant,
    /// Set once a store is attached (replies then keep their place behind held frames).
    durable: std::sync::atomic::AtomicBool,
}

impl Hub {
    pub fn new(
        limits: Limits,
        telemetry: TelemetrySink,
        counters: Arc<Counters>,
        node: &str,
    ) -> Self {
        Hub {
            inner: Mutex::new(Inner {
                broker: Broker::new(limits),
                outboxes: HashMap::new(),
                fx: Effects::default(),
                armed: None,
                fed: None,
                gate: None,
            }),
            timer: Notify::new(),
            activity: AtomicU64::new(0),
            last_active_ms: AtomicU64::new(0),
            active: Notify::new(),
            counters,
            metrics: Metrics::new(),
            telemetry,
            node: Arc::from(node),
            started: Instant::now(),
            durable: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The lock for an operation that changes the broker's state (and so allocates or frees):
    /// what the trimmer counts as activity. Reading counts and stats (`systemctl status`,
    /// metrics, the timer re-arming) does not keep the daemon from being quiet.
    fn lock_to_change(&self) -> MutexGuard<'_, Inner> {
        self.activity.fetch_add(1, Ordering::Relaxed);
        let now_ms = self.started.elapsed().as_millis() as u64;
        self.last_active_ms.store(now_ms, Ordering::Relaxed);
        self.active.notify_one();
        self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would be a bug in the broker; the state is still
        // the best there is, so keep serving rather than poison every connection.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one broker operation and delivers what it produced, writing it at once.
    pub fn run<R>(&self, op: impl FnOnce(&mut Broker, Instant, &mut Effects) -> R) -> R {
        let mut batch = Batch::new();
        let r = self.run_in(&mut batch, op);
        batch.flush();
        r
    }

    /// Runs one broker operation and queues what it produced; the frames are written when
    /// `batch` is flushed (after the caller's last operation of a burst).
    pub fn run_in<R>(
        &self,
        batch: &mut Batch,
        op: impl FnOnce(&mut Broker, Instant, &mut Effects) -> R,
    ) -> R {
        let mut guard = self.lock_to_change();
        let inner = &mut *guard;
        let now = Instant::now();
        let r = op(&mut inner.broker, now, &mut inner.fx);
        self.deliver(inner, now, batch);
        r
    }

    pub fn connect(&self, peer: PeerId, info: PeerInfo, outbox: Outbox) {
        let mut inner = self.lock_to_change();
        inner.broker.connect(peer, info);
        inner.outboxes.insert(peer, outbox);
    }

    pub fn disconnect(&self, peer: PeerId) {
        self.run(|b, now, fx| b.disconnect(peer, now, fx));
        self.lock_to_change().outboxes.remove(&peer);
    }

    /// Hands a catching-up UI its next part of the replay (its connection asks once its
    /// outbox has room: `Outbox::take_replay`).
    pub fn replay(&self, peer: PeerId, batch: &mut Batch) {
        let mut guard = self.lock_to_change();
        let inner = &mut *guard;
        if !inner.outboxes.contains_key(&peer) {
            return;
        }
        let now = Instant::now();
        let outbox = inner.outboxes.get(&peer).expect("checked above");
        replay_step(&mut inner.broker, outbox, peer, now, &mut inner.fx);
        self.deliver(inner, now, batch);
    }

    /// Federates the broker: its effects for other nodes go to `link`'s bounded queue.
    pub fn federate(&self, policy: FedPolicy, link: FedLink) {
        let mut inner = self.lock_to_change();
        inner.broker.set_federation(Some(policy));
        inner.fed = Some(link);
    }

    /// A new sharing policy (reload); `None` when the daemon is not federated.
    pub fn set_fed_policy(&self, policy: FedPolicy) {
        let mut inner = self.lock_to_change();
        if inner.fed.is_some() {
            inner.broker.set_federation(Some(policy));
        }
    }

    /// Sets the policy rules every local approval is checked against (`None`: none).
    pub fn set_policy(&self, policy: Option<crate::broker::PolicyDecider>) {
        self.run(|b, _, _| b.set_policy(policy));
    }

    pub fn set_limits(&self, limits: Limits) {
        self.run(|b, _, _| b.set_limits(limits));
    }

    pub fn limits(&self) -> Limits {
        self.lock().broker.limits().clone()
    }

    /// Re-evaluates every connected peer's rights (new access rules after a reload).
    pub fn update_rights(&self, rights_of: impl Fn(&PeerInfo) -> Rights) {
        let mut batch = Batch::new();
        let mut guard = self.lock_to_change();
        let inner = &mut *guard;
        let now = Instant::now();
        let peers: Vec<(PeerId, Rights)> = inner
            .outboxes
            .keys()
            .filter_map(|&id| inner.broker.peer_info(id).map(|info| (id, rights_of(info))))
            .collect();
        for (id, rights) in peers {
            inner.broker.set_rights(id, rights, now, &mut inner.fx);
        }
        self.deliver(inner, now, &mut batch);
        drop(guard);
        batch.flush();
    }

    /// What the broker knows, for the metrics: outcome counts, roles, pending.
    pub fn snapshot(&self) -> Snapshot {
        self.lock().broker.snapshot()
    }

    /// Federation state, when federated.
    pub fn fed_summary(&self) -> Option<FedSummary> {
        let inner = self.lock();
        let link = inner.fed.as_ref()?;
        let (remote_pending, shared_pending) = inner.broker.federated_counts();
        let s = &link.status;
        Some(FedSummary {
            connected: s.connected(),
            nodes: s.nodes().len(),
            remote_pending,
            shared_pending,
            rtt_us: s.rtt_us.load(Ordering::Relaxed),
            reconnects: s.reconnects.load(Ordering::Relaxed),
        })
    }

    /// The Prometheus text exposition of every metric, as of now.
    pub fn render_metrics(&self) -> String {
        let fed = self.fed_summary();
        self.metrics.render(
            &self.snapshot(),
            &self.counters,
            self.uptime(),
            fed.as_ref(),
        )
    }

    /// Puts the store between the broker and the peers: the broker records what it must
    /// persist, and frames wait for it (`Gate`). What the store held pending or owed is
    /// restored first (before any connection is served).
    pub fn attach_store(&self, store: Arc<Store>, grace: std::time::Duration) {
        let mut guard = self.lock_to_change();
        let inner = &mut *guard;
        inner.broker.set_durable(grace, store.available.clone());
        let loaded = store.take_loaded();
        self.durable.store(true, Ordering::Relaxed);
        inner.gate = Some(Gate {
            store,
            submitted: 0,
            committed: 0,
            held: VecDeque::new(),
        });
        let Some(loaded) = loaded else { return };
        let now = Instant::now();
        let wall = SystemTime::now();
        let (mut restored, mut owed, mut unreadable) = (0, 0, 0);
        for r in &loaded.pending {
            match crate::store::to_restored(r, now, wall) {
                Ok(req) => {
                    inner.broker.restore(req, now, &mut inner.fx);
                    restored += 1;
                }
                Err(e) => {
                    unreadable += 1;
                    tracing::warn!(
                        correlation_id = r.correlation_id,
                        "a stored request no longer validates and is not restored: {e}"
                    );
                }
            }
        }
        // Owed: ended while the producer was away. Sent: handed to a connected producer just
        // before the stop, maybe cut off by it (a crash); a resend gets it as well.
        let owed_then_sent = loaded.owed.iter().map(|r| (r, false));
        for (r, sent) in owed_then_sent.chain(loaded.sent.iter().map(|r| (r, true))) {
            let (Some(frame), Ok(req)) =
                (r.response.as_ref(), crate::store::to_restored(r, now, wall))
            else {
                continue;
            };
            let body = req.request.body().clone();
            let frame = Bytes::from(frame.clone().into_bytes());
            inner
                .broker
                .restore_undelivered(&r.correlation_id, r.uid, body, frame, now, sent);
            owed += usize::from(!sent);
        }
        tracing::info!(
            restored,
            owed,
            just_sent = loaded.sent.len(),
            unreadable,
            "pending requests restored from the store"
        );
        let mut batch = Batch::new();
        self.deliver(inner, now, &mut batch);
        drop(guard);
        batch.flush();
    }

    /// The store committed every operation group up to `committed`: their frames go out.
    pub fn release(&self, committed: u64) {
        let mut batch = Batch::new();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(gate) = inner.gate.as_mut() else {
            return;
        };
        gate.committed = gate.committed.max(committed);
        let mut overflowed = Vec::new();
        while gate
            .held
            .front()
            .is_some_and(|(tag, ..)| *tag <= gate.committed)
        {
            let (_, peer, frame) = gate.held.pop_front().expect("checked above");
            if let Some(outbox) = inner.outboxes.get(&peer) {
                match outbox.push(&frame, &mut batch) {
                    Ok(()) => Counters::bump(&self.counters.frames_out),
                    Err(_) => overflowed.push(peer),
                }
            }
        }
        let now = Instant::now();
        for peer in overflowed {
            self.drop_slow(inner, peer, now);
        }
        self.deliver(inner, now, &mut batch);
        drop(guard);
        batch.flush();
    }

    /// Releases frames as the store commits, until the store stops.
    pub async fn follow_store(&self, mut committed: tokio::sync::watch::Receiver<u64>) {
        loop {
            let seq = *committed.borrow_and_update();
            self.release(seq);
            if committed.changed().await.is_err() {
                self.release(*committed.borrow());
                return;
            }
        }
    }

    /// A connection's own reply (`welcome`, `pong`, `stats`, a frame error): returned to be
    /// sent at once, unless frames decided before it still wait for a commit, in which case it
    /// waits behind them (and `None` is returned).
    pub fn reply_in_order(&self, peer: PeerId, frame: Bytes) -> Option<Bytes> {
        if !self.durable.load(Ordering::Relaxed) {
            return Some(frame);
        }
        let mut inner = self.lock();
        match inner.gate.as_mut().filter(|g| g.must_wait()) {
            Some(gate) => {
                gate.held.push_back((gate.submitted, peer, frame));
                None
            }
            None => Some(frame),
        }
    }

    /// The store, when the daemon has one (`history` queries read it).
    pub fn store(&self) -> Option<Arc<Store>> {
        self.lock().gate.as_ref().map(|g| g.store.clone())
    }

    /// Whether the daemon has a store (pending requests then survive a shutdown).
    pub fn is_durable(&self) -> bool {
        self.lock().gate.is_some()
    }

    /// Expires deadlines until `stop` is cancelled. One task for all requests; it sleeps
    /// until the earliest deadline and is woken only when an earlier one is added.
    pub async fn run_timer(&self, stop: CancellationToken) {
        loop {
            let next = {
                let mut inner = self.lock();
                inner.armed = inner.broker.next_deadline();
                inner.armed
            };
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.timer.notified() => {}
                _ = sleep => self.run(|b, now, fx| b.expire(now, fx)),
            }
        }
    }

    /// Ends every pending request with `shutdown`.
    pub fn shutdown(&self) {
        self.run(|b, now, fx| b.shutdown(now, fx));
    }

    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.broker.pending_len(), inner.broker.ui_count())
    }
}

impl Gate {
    /// Whether a frame must wait: something before it is not committed yet.
    fn must_wait(&self) -> bool {
        !self.held.is_empty() || self.committed < self.submitted
    }
}

#[cfg(test)]
mod tests;
