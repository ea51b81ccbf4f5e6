//! The broker: pending questions keyed by correlationId, which UIs have seen which, deadlines,
//! and the outcome of every request. Pure state: it never touches a socket and never awaits;
//! each operation appends what must be sent (and logged) to an `Effects`, which the caller
//! delivers through the connections' bounded queues.

mod error;
mod remote;
mod stats;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::time::{Duration, Instant};

pub use error::BrokerError;
pub use remote::{FedOut, FedPolicy, Forward, RemoteQuestion, SharedEnd, SharedQuestion};
pub use stats::BrokerStats;

use crate::protocol::{
    encode, encode_fast, AskUserRequest, AskUserResponse, BusEvent, FrameError, NoUiPolicy,
    Outcome, ProducerInfo, ProducerResponse, RequestHead, ServerFrame, TimeoutMs, UiInfo,
    UiRequestRef, WithdrawReason,
};
use crate::questions::{self, question_types, DaemonOutcome, QuestionMeta, ToolResult};
use crate::telemetry::record::Record;

/// The largest tool result the broker builds for an answer (the response frame stays under
/// the 16 MiB clients accept).
pub const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// A connection, as the broker names it.
pub type PeerId = u64;

/// What the daemon knows of a connected peer (from SO_PEERCRED, the access rules and
/// `hello`/`subscribe`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerInfo {
    pub client: Option<String>,
    pub pid: Option<i32>,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (SO_PEERGROUPS), for group rules re-evaluated on reload.
    pub groups: Vec<u32>,
    pub rights: Rights,
}

/// What the access rules let a peer do. Isolation is routing: a UI (or watcher) sees, and
/// may answer, only questions from producers of its own uid, unless it is an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights {
    pub produce: bool,
    pub ui: bool,
    pub operator: bool,
}

impl Default for Rights {
    /// A peer of the daemon's own uid: it may do anything but see other users' questions.
    fn default() -> Self {
        Rights {
            produce: true,
            ui: true,
            operator: false,
        }
    }
}

impl PeerInfo {
    /// Whether this peer, as a UI or watcher, may see a question asked by `producer_uid`.
    fn sees(&self, producer_uid: u32) -> bool {
        self.rights.ui && (self.rights.operator || self.uid == producer_uid)
    }
}

/// Connections by what they do, for the metrics. A peer that did several things counts
/// once, as the first of: UI, watcher, producer; `idle` ones have done none yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoleCounts {
    pub producer: usize,
    pub ui: usize,
    pub watcher: usize,
    pub idle: usize,
}

/// The broker's counts at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub stats: BrokerStats,
    pub roles: RoleCounts,
    pub pending: usize,
}

/// The limits and defaults that apply to new requests; replaceable at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub no_ui: NoUiPolicy,
    pub max_pending_per_connection: usize,
    /// Pending requests all connections of one uid may have (dbus-broker's per-user quota).
    pub max_pending_per_uid: usize,
    pub max_pending_total: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_timeout_ms: 600_000,
            max_timeout_ms: 86_400_000,
            no_ui: NoUiPolicy::Wait,
            max_pending_per_connection: 128,
            max_pending_per_uid: 262_144,
            max_pending_total: 262_144,
        }
    }
}

/// An ask-user-request whose questions passed the reference's validation, normalized. Built
/// outside the broker's lock: validation is the costly part of a request.
#[derive(Debug)]
pub struct ValidRequest {
    correlation_id: String,
    timeout_ms: Option<TimeoutMs>,
    no_ui: Option<NoUiPolicy>,
    /// The normalized questions' JSON text.
    questions: Box<str>,
    meta: Vec<QuestionMeta>,
}

impl ValidRequest {
    /// Validates and normalizes; on failure returns the error for `Broker::reject`.
    pub fn check(req: AskUserRequest) -> Result<ValidRequest, (String, BrokerError)> {
        match questions::check(req.questions) {
            Ok(normalized) => Ok(ValidRequest {
                meta: normalized.meta,
                questions: normalized.questions,
                correlation_id: req.correlation_id,
                timeout_ms: req.timeout_ms,
                no_ui: req.no_ui,
            }),
            Err(msg) => Err((req.correlation_id, BrokerError::InvalidQuestions(msg))),
        }
    }

    /// The fast path: a request whose plain questions `protocol::parse_fast` read from a
    /// payload of `payload_len` bytes; `None` leaves it to `parse_inbound` and [`Self::check`].
    pub fn fast(
        head: RequestHead,
        questions: questions::fast::Questions,
        payload_len: usize,
    ) -> Option<ValidRequest> {
        let normalized = questions::fast::check(questions, payload_len)?;
        Some(ValidRequest {
            meta: normalized.meta,
            questions: normalized.questions,
            correlation_id: head.correlation_id,
            timeout_ms: head.timeout_ms,
            no_ui: head.no_ui,
        })
    }

    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    /// Debug builds: a request the fast path took from `payload` must be what the reference
    /// paths (`protocol::parse::reference`, then `questions::normalize`) make of it.
    #[cfg(debug_assertions)]
    pub fn assert_reference_agrees(&self, payload: &[u8]) {
        let frame = crate::protocol::parse::reference::parse(payload);
        let Ok(crate::protocol::Inbound::AskUserRequest(req)) = frame else {
            panic!("the fast path took a request the reference refuses: {frame:?}");
        };
        let reference = questions::normalize(&req.questions.into_params())
            .expect("the reference accepts the questions the fast path took");
        assert!(
            req.correlation_id == self.correlation_id
                && req.timeout_ms == self.timeout_ms
                && req.no_ui == self.no_ui
                && *reference.questions == *self.questions
                && reference.meta == self.meta,
            "the fast path differs from the reference on {}",
            String::from_utf8_lossy(payload)
        );
    }
}

/// One thing to send to one peer.
#[derive(Debug, Clone)]
pub enum Msg {
    /// An encoded frame (shared, so a broadcast is encoded once).
    Frame(Bytes),
    /// An error; encoded (and counted) by whoever delivers it.
    Error(FrameError),
}

/// What an operation asks the caller to do, in order.
#[derive(Debug, Default)]
pub struct Effects {
    pub sends: Vec<(PeerId, Msg)>,
    /// Telemetry records; `ts` and `node` are left for the caller to stamp.
    pub records: Vec<Record>,
    /// UIs that have more of the pending table to receive: call `Broker::replay` for each once
    /// their queue has room.
    pub replay: Vec<PeerId>,
    /// Events for the watchers (`Broker::watchers`); `ts` is left for the caller to stamp.
    pub events: Vec<BusEvent>,
    /// What the federation task must tell the other nodes (empty without federation).
    pub federation: Vec<FedOut>,
}

impl Effects {
    pub fn clear(&mut self) {
        self.sends.clear();
        self.records.clear();
        self.replay.clear();
        self.events.clear();
        self.federation.clear();
    }

    fn frame(&mut self, to: PeerId, frame: Bytes) {
        self.sends.push((to, Msg::Frame(frame)));
    }

    fn error(&mut self, to: PeerId, err: FrameError) {
        self.sends.push((to, Msg::Error(err)));
    }
}

/// How far a UI has got through the pending table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    /// Receiving the replay; every request with a sequence number up to this one was sent.
    /// Live broadcasts skip it: the replay reaches them in order.
    CatchingUp(u64),
    Live,
}

impl Cursor {
    fn has_seen(self, seq: u64) -> bool {
        match self {
            Cursor::CatchingUp(last) => seq <= last,
            Cursor::Live => true,
        }
    }
}

#[derive(Debug)]
struct Peer {
    info: PeerInfo,
    /// `Some` once the connection subscribed as a UI.
    ui: Option<Cursor>,
    /// Requests this peer asked that are still pending.
    owned: HashSet<Arc<str>>,
    /// Whether it ever sent an ask-user-request (its role, for the metrics).
    asked: bool,
}

#[derive(Debug)]
struct Pending {
    seq: u64,
    producer: PeerId,
    producer_info: ProducerInfo,
    questions: Box<str>,
    meta: Vec<QuestionMeta>,
    accepted_at: Instant,
    deadline: Instant,
    timeout_ms: u64,
    /// Federation: the node a remote question was asked on (`None`: asked here). A remote
    /// question's `producer` is `REMOTE` and its deadline the origin's plus a grace.
    origin: Option<Arc<str>>,
    /// Federation: a local question the other nodes were told about.
    shared: bool,
}

/// The broker's whole state.
#[derive(Debug)]
pub struct Broker {
    limits: Limits,
    peers: HashMap<PeerId, Peer>,
    /// Subscribed UIs, in a stable order so broadcasts are deterministic.
    uis: BTreeSet<PeerId>,
    /// Observers of the bus (`watch`).
    watchers: BTreeSet<PeerId>,
    pending: HashMap<Arc<str>, Pending>,
    /// Pending requests per producer uid: the per-uid quota, and what a UI of that uid sees.
    pending_by_uid: HashMap<u32, usize>,
    /// Pending requests by arrival: replay order.
    by_seq: BTreeMap<u64, Arc<str>>,
    /// Deadlines: one ordered set instead of a timer per request, so 100,000 idle pending
    /// questions cost no wake-ups until the earliest one is due.
    deadlines: BTreeSet<(Instant, u64)>,
    next_seq: u64,
    stats: BrokerStats,
    /// Set by `shutdown`: requests that still arrive are answered `shutdown` at once.
    closed: bool,
    /// Set when the daemon is federated.
    fed: Option<FedPolicy>,
    /// How many of `pending` are remote (they count against no local limit).
    remote_len: usize,
}

impl Broker {
    pub fn new(limits: Limits) -> Self {
        Broker {
            limits,
            peers: HashMap::new(),
            uis: BTreeSet::new(),
            watchers: BTreeSet::new(),
            pending: HashMap::new(),
            pending_by_uid: HashMap::new(),
            by_seq: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            next_seq: 1,
            stats: BrokerStats::default(),
            closed: false,
            fed: None,
            remote_len: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// New limits apply to requests accepted from now on; pending ones keep their deadlines.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    pub fn stats(&self) -> &BrokerStats {
        &self.stats
    }

    /// The counts at this moment, for the metrics.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            stats: self.stats.clone(),
            roles: self.role_counts(),
            pending: self.pending_len(),
        }
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    pub fn ui_count(&self) -> usize {
        self.uis.len()
    }

    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Peers that asked at least one question still pending.
    pub fn producer_count(&self) -> usize {
        self.peers.values().filter(|p| !p.owned.is_empty()).count()
    }

    pub fn connect(&mut self, peer: PeerId, info: PeerInfo) {
        self.peers.insert(
            peer,
            Peer {
                info,
                ui: None,
                owned: HashSet::new(),
                asked: false,
            },
        );
    }

    /// Connections by role.
    pub fn role_counts(&self) -> RoleCounts {
        let mut c = RoleCounts::default();
        for (id, p) in &self.peers {
            if p.ui.is_some() {
                c.ui += 1;
            } else if self.watchers.contains(id) {
                c.watcher += 1;
            } else if p.asked {
                c.producer += 1;
            } else {
                c.idle += 1;
            }
        }
        c
    }

    /// Applies re-evaluated access rights (after a reload) without dropping the peer. A UI
    /// that gains or loses sight of another user's questions is sent them, or told they are
    /// withdrawn; one that may no longer be a UI stops being one.
    pub fn set_rights(&mut self, peer: PeerId, rights: Rights, now: Instant, fx: &mut Effects) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        let before = p.info.clone();
        p.info.rights = rights;
        let after = p.info.clone();
        let cursor = p.ui;
        if !rights.ui {
            p.ui = None;
            self.uis.remove(&peer);
            self.watchers.remove(&peer);
        }
        let Some(cursor) = cursor else {
            return;
        };
        for (&seq, id) in &self.by_seq {
            if !cursor.has_seen(seq) {
                break;
            }
            let req = &self.pending[id];
            let uid = req.producer_info.uid;
            match (before.sees(uid), after.sees(uid)) {
                (false, true) => fx.frame(peer, self.ui_frame(id, req, now)),
                (true, false) => {
                    fx.frame(peer, encode_fast::withdrawn(id, WithdrawReason::Withdrawn))
                }
                _ => {}
            }
        }
    }

    /// Records the name a peer announced in `hello`.
    pub fn set_client(&mut self, peer: PeerId, client: String) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.info.client = Some(client);
        }
    }

    pub fn peer_info(&self, peer: PeerId) -> Option<&PeerInfo> {
        self.peers.get(&peer).map(|p| &p.info)
    }

    /// The connection closed: its pending requests are withdrawn from the UIs. A UI leaving
    /// changes nothing for pending requests; another UI can still answer them.
    pub fn disconnect(&mut self, peer: PeerId, now: Instant, fx: &mut Effects) {
        let Some(p) = self.peers.remove(&peer) else {
            return;
        };
        self.uis.remove(&peer);
        self.watchers.remove(&peer);
        let mut owned: Vec<_> = p
            .owned
            .into_iter()
            .filter_map(|id| self.pending.get(&id).map(|r| (r.seq, id)))
            .collect();
        owned.sort_unstable();
        for (_, id) in owned {
            let req = self.remove_pending(&id);
            self.withdraw(&id, &req, WithdrawReason::ProducerGone, None, None, fx);
            self.ended_shared(&id, &req, "producer-gone", None, fx);
            self.stats.producer_gone += 1;
            if !self.watchers.is_empty() {
                let latency = (now - req.accepted_at).as_millis() as u64;
                fx.events
                    .push(event("producer-gone", &id, &req, None, Some(latency), None));
            }
            fx.records.push(record(
                &id,
                "producer-gone",
                &req,
                None,
                now,
                Answered::None,
            ));
        }
    }

    /// Makes `peer` a UI. It is sent `subscribed` with the pending count now, then (through
    /// `replay`) every pending request oldest first, then live ones.
    pub fn subscribe(&mut self, peer: PeerId, client: Option<String>, fx: &mut Effects) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        if !p.info.rights.ui {
            let err = BrokerError::NotAUi(p.info.uid);
            fx.error(peer, FrameError::new(err.code(), err.to_string()));
            return;
        }
        // The count of what this UI will be replayed: other users' questions stay unseen.
        let visible = if p.info.rights.operator {
            self.pending.len()
        } else {
            self.pending_by_uid.get(&p.info.uid).copied().unwrap_or(0)
        };
        let p = self.peers.get_mut(&peer).expect("checked above");
        if client.is_some() {
            p.info.client = client;
        }
        // Subscribing again replays from the start: the UI asked to be brought up to date.
        p.ui = Some(Cursor::CatchingUp(0));
        self.uis.insert(peer);
        let subscribed = ServerFrame::Subscribed {
            pending: visible as u64,
        };
        fx.frame(peer, encode(&subscribed));
        fx.replay.push(peer);
    }

    /// Makes `peer` an observer: it is sent `watching`, then an event per request arrival and
    /// end. It does not become a UI (it cannot answer).
    pub fn watch(&mut self, peer: PeerId, client: Option<String>, fx: &mut Effects) {
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        if !p.info.rights.ui {
            let err = BrokerError::NotAUi(p.info.uid);
            fx.error(peer, FrameError::new(err.code(), err.to_string()));
            return;
        }
        if client.is_some() {
            p.info.client = client;
        }
        self.watchers.insert(peer);
        fx.frame(peer, encode(&ServerFrame::Watching {}));
    }

    /// The watchers that receive an event about a request of `producer_uid`.
    pub fn watchers_of(&self, producer_uid: u32) -> impl Iterator<Item = PeerId> + '_ {
        self.watchers
            .iter()
            .copied()
            .filter(move |w| self.peers[w].info.sees(producer_uid))
    }

    /// Sends a catching-up UI up to `max_frames` more pending requests. Once it has them all
    /// it becomes live (in the same step, so nothing falls between replay and live).
    /// Returns whether more remain (the caller calls again when the UI's queue has room).
    pub fn replay(
        &mut self,
        peer: PeerId,
        max_frames: usize,
        now: Instant,
        fx: &mut Effects,
    ) -> bool {
        let Some(p) = self.peers.get(&peer) else {
            return false;
        };
        let Some(Cursor::CatchingUp(last)) = p.ui else {
            return false;
        };
        // Other users' questions are passed over (the cursor moves past them) unseen.
        let mut cursor = last;
        let mut sent = 0;
        let mut more = false;
        for (&seq, id) in self.by_seq.range(last + 1..) {
            let req = &self.pending[id];
            if p.info.sees(req.producer_info.uid) {
                if sent == max_frames {
                    more = true;
                    break;
                }
                fx.frame(peer, self.ui_frame(id, req, now));
                sent += 1;
            }
            cursor = seq;
        }
        let p = self.peers.get_mut(&peer).expect("checked above");
        p.ui = Some(if more {
            Cursor::CatchingUp(cursor)
        } else {
            Cursor::Live
        });
        if more {
            fx.replay.push(peer);
        }
        more
    }

    /// A request failed validation (done outside the broker by `ValidRequest::check`): the
    /// producer gets the error, and the rejection is logged like every other end.
    pub fn reject(&mut self, peer: PeerId, id: &str, err: BrokerError, fx: &mut Effects) {
        self.reject_with(peer, Some(id), err.into_frame_error(id), &[], fx);
    }

    /// An ask-user-request refused while parsing its own fields (correlationId, timeoutMs,
    /// noUi): answered and logged like any rejected request, with the id when it had one.
    pub fn reject_malformed(&mut self, peer: PeerId, err: FrameError, fx: &mut Effects) {
        let id = err.correlation_id.clone();
        self.reject_with(peer, id.as_deref(), err, &[], fx);
    }

    fn reject_with(
        &mut self,
        peer: PeerId,
        id: Option<&str>,
        err: FrameError,
        meta: &[QuestionMeta],
        fx: &mut Effects,
    ) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let code = err.code;
        self.stats.rejected += 1;
        if !self.watchers.is_empty() {
            fx.events.push(BusEvent {
                event: "rejected".into(),
                ts: String::new(),
                correlation_id: id.map(str::to_owned),
                producer: producer_info(&p.info),
                ui: None,
                latency_ms: None,
                timeout_ms: None,
                question_types: question_types(meta)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                headers: headers(meta),
                code: Some(code.as_str().to_owned()),
                node: None,
            });
        }
        fx.records.push(Record {
            ts: SystemTime::UNIX_EPOCH,
            node: None,
            correlation_id: id.map(str::to_owned),
            reason: "rejected",
            code: Some(code),
            producer: producer_info(&p.info),
            ui: None,
            latency_ms: 0,
            question_types: question_types(meta),
            dismissed: false,
            empty_submission: false,
            answer_count: 0,
        });
        fx.error(peer, err);
    }

    /// A producer asks with a validated request. Exactly one of: an error frame (rejected),
    /// an immediate `no-ui` response, or the request becomes pending and goes to every UI.
    pub fn ask(&mut self, peer: PeerId, req: ValidRequest, now: Instant, fx: &mut Effects) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let producer_info = producer_info(&p.info);
        let owned = p.owned.len();
        let (uid, may_produce) = (p.info.uid, p.info.rights.produce);
        self.peers.get_mut(&peer).expect("checked above").asked = true;
        let id = req.correlation_id;
        let meta = req.meta;
        if !may_produce {
            let err = BrokerError::NotAProducer(uid);
            return self.reject_with(peer, Some(&id), err.into_frame_error(&id), &meta, fx);
        }
        if self.pending.contains_key(id.as_str()) {
            let err = BrokerError::DuplicateCorrelationId(id.clone());
            return self.reject_with(peer, Some(&id), err.into_frame_error(&id), &meta, fx);
        }
        if owned >= self.limits.max_pending_per_connection {
            let err =
                BrokerError::TooManyPendingForConnection(self.limits.max_pending_per_connection);
            return self.reject_with(peer, Some(&id), err.into_frame_error(&id), &meta, fx);
        }
        let of_uid =
            self.pending_by_uid.get(&uid).copied().unwrap_or(0) - self.remote_pending_of(uid);
        if of_uid >= self.limits.max_pending_per_uid {
            let err = BrokerError::TooManyPendingForUid {
                uid,
                limit: self.limits.max_pending_per_uid,
            };
            return self.reject_with(peer, Some(&id), err.into_frame_error(&id), &meta, fx);
        }
        if self.pending.len() - self.remote_len >= self.limits.max_pending_total {
            let err = BrokerError::TooManyPendingTotal(self.limits.max_pending_total);
            return self.reject_with(peer, Some(&id), err.into_frame_error(&id), &meta, fx);
        }
        let max = self.limits.max_timeout_ms;
        let timeout_ms = req
            .timeout_ms
            .map_or(self.limits.default_timeout_ms.min(max), |t| t.clamp(max));
        self.stats.accepted += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let pending = Pending {
            seq,
            producer: peer,
            producer_info,
            questions: req.questions,
            meta,
            accepted_at: now,
            deadline: now + Duration::from_millis(timeout_ms),
            timeout_ms,
            origin: None,
            shared: false,
        };
        if self.closed {
            let result =
                questions::daemon_result(&pending.meta, DaemonOutcome::Shutdown, timeout_ms);
            self.finish(&id, pending, Outcome::Shutdown, result, None, now, fx);
            return;
        }
        let no_ui = req.no_ui.unwrap_or(self.limits.no_ui);
        if self.uis.is_empty() && no_ui == NoUiPolicy::Reject {
            let result = questions::daemon_result(&pending.meta, DaemonOutcome::NoUi, timeout_ms);
            self.finish(&id, pending, Outcome::NoUi, result, None, now, fx);
            return;
        }
        let id: Arc<str> = Arc::from(id);
        let mut pending = pending;
        self.share(&id, &mut pending, fx);
        let live: Vec<PeerId> = self
            .uis
            .iter()
            .copied()
            .filter(|ui| {
                let p = &self.peers[ui];
                p.ui == Some(Cursor::Live) && p.info.sees(uid)
            })
            .collect();
        if !live.is_empty() {
            let frame = self.ui_frame(&id, &pending, now);
            for ui in live {
                fx.frame(ui, frame.clone());
            }
        }
        if !self.watchers.is_empty() {
            fx.events.push(event(
                "request",
                &id,
                &pending,
                None,
                None,
                Some(timeout_ms),
            ));
        }
        self.deadlines.insert((pending.deadline, seq));
        self.by_seq.insert(seq, id.clone());
        self.peers
            .get_mut(&peer)
            .expect("checked above")
            .owned
            .insert(id.clone());
        *self.pending_by_uid.entry(uid).or_default() += 1;
        self.pending.insert(id, pending);
    }

    /// The producer withdraws a question it asked.
    pub fn cancel(&mut self, peer: PeerId, id: &str, now: Instant, fx: &mut Effects) {
        let owned = self.pending.get(id).is_some_and(|r| r.producer == peer);
        if !owned {
            // Another producer's question is "not pending" for this one: nothing leaks.
            fx.error(
                peer,
                BrokerError::NotPending(id.to_owned()).into_frame_error(id),
            );
            return;
        }
        let req = self.remove_pending(id);
        self.withdraw(id, &req, WithdrawReason::Withdrawn, None, None, fx);
        let result = questions::daemon_result(&req.meta, DaemonOutcome::Withdrawn, req.timeout_ms);
        self.finish(id, req, Outcome::Withdrawn, result, None, now, fx);
    }

    /// A UI answers (or dismisses). The first valid answer wins; every other UI that has the
    /// question is told it was answered; the winner gets an acknowledgement.
    pub fn respond(&mut self, peer: PeerId, resp: AskUserResponse, now: Instant, fx: &mut Effects) {
        let id = resp.correlation_id.as_str();
        let Some(ui) = self.peers.get(&peer).filter(|p| p.ui.is_some()) else {
            fx.error(peer, BrokerError::NotSubscribed.into_frame_error(id));
            return;
        };
        if !ui.info.rights.ui {
            fx.error(peer, BrokerError::NotAUi(ui.info.uid).into_frame_error(id));
            return;
        }
        let Some(req) = self.pending.get(id) else {
            fx.error(
                peer,
                BrokerError::NotPending(id.to_owned()).into_frame_error(id),
            );
            return;
        };
        if !ui.info.sees(req.producer_info.uid) {
            let err = BrokerError::ForeignQuestion(id.to_owned());
            fx.error(peer, err.into_frame_error(id));
            return;
        }
        let count = req.meta.len();
        let remote = req.origin.clone();
        if !resp.cancelled {
            if let Some((&index, _)) = resp.answers.iter().find(|(&i, _)| i >= count) {
                let err = BrokerError::AnswerOutOfRange { index, count };
                fx.error(peer, err.into_frame_error(id));
                return;
            }
            let size = questions::answered_result_size_bound(&req.meta, &resp.answers);
            if size > MAX_RESULT_BYTES {
                let err = BrokerError::ResultTooLarge {
                    size,
                    limit: MAX_RESULT_BYTES,
                };
                fx.error(peer, err.into_frame_error(id));
                return;
            }
        }
        let answered_by = UiInfo {
            client: ui.info.client.clone(),
            pid: ui.info.pid,
            node: self.fed.as_ref().map(|f| f.node.to_string()),
        };
        if let Some(origin) = remote {
            // The origin decides; this UI learns the outcome from its reply.
            return self.forward(peer, origin, resp, answered_by, fx);
        }
        let req = self.remove_pending(id);
        self.withdraw(
            id,
            &req,
            WithdrawReason::Answered,
            Some(peer),
            Some(&answered_by),
            fx,
        );
        let (outcome, result, answers) = if resp.cancelled {
            (
                Outcome::Dismissed,
                questions::dismissed_result(&req.meta),
                BTreeMap::new(),
            )
        } else {
            let result = questions::answered_result(&req.meta, &resp.answers);
            (Outcome::Answered, result, resp.answers)
        };
        fx.frame(peer, encode_fast::ack(id, outcome));
        self.stats.record_latency(now - req.accepted_at);
        self.finish_with(
            id,
            req,
            outcome,
            result,
            answers,
            Some(answered_by),
            now,
            fx,
        );
    }

    /// Times out every request whose deadline is at or before `now`.
    pub fn expire(&mut self, now: Instant, fx: &mut Effects) {
        while let Some(&(deadline, seq)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            let id = self.by_seq[&seq].clone();
            let req = self.remove_pending(&id);
            self.withdraw(&id, &req, WithdrawReason::Timeout, None, None, fx);
            if req.origin.is_some() {
                // Its origin's end never came (it is checked a grace after the deadline).
                continue;
            }
            let result =
                questions::daemon_result(&req.meta, DaemonOutcome::Timeout, req.timeout_ms);
            self.finish(&id, req, Outcome::Timeout, result, None, now, fx);
        }
    }

    /// When the next request times out, if any is pending.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }

    /// Every pending producer gets `shutdown`, every UI `ask-user-withdrawn` `shutdown`.
    pub fn shutdown(&mut self, now: Instant, fx: &mut Effects) {
        self.closed = true;
        let ids: Vec<Arc<str>> = self.by_seq.values().cloned().collect();
        for id in ids {
            let req = self.remove_pending(&id);
            self.withdraw(&id, &req, WithdrawReason::Shutdown, None, None, fx);
            if req.origin.is_some() {
                continue;
            }
            let result =
                questions::daemon_result(&req.meta, DaemonOutcome::Shutdown, req.timeout_ms);
            self.finish(&id, req, Outcome::Shutdown, result, None, now, fx);
        }
    }

    fn remove_pending(&mut self, id: &str) -> Pending {
        let req = self
            .pending
            .remove(id)
            .expect("caller checked it is pending");
        self.by_seq.remove(&req.seq);
        self.deadlines.remove(&(req.deadline, req.seq));
        if req.origin.is_some() {
            self.remote_len -= 1;
        }
        let uid = req.producer_info.uid;
        if let Some(n) = self.pending_by_uid.get_mut(&uid) {
            *n -= 1;
            if *n == 0 {
                self.pending_by_uid.remove(&uid);
            }
        }
        if let Some(p) = self.peers.get_mut(&req.producer) {
            p.owned.remove(id);
        }
        req
    }

    /// Tells every UI that was sent request `seq` (except `except`) that it is gone. One that
    /// may not see it was never sent it (`sees` only changes through `set_rights`, which
    /// sends or withdraws what changed).
    fn withdraw(
        &self,
        id: &str,
        req: &Pending,
        reason: WithdrawReason,
        except: Option<PeerId>,
        answered_by: Option<&UiInfo>,
        fx: &mut Effects,
    ) {
        let (seq, producer_uid) = (req.seq, req.producer_info.uid);
        let mut frame = None;
        for &ui in &self.uis {
            let p = &self.peers[&ui];
            if Some(ui) == except
                || !p.ui.is_some_and(|c| c.has_seen(seq))
                || !p.info.sees(producer_uid)
            {
                continue;
            }
            let frame =
                frame.get_or_insert_with(|| self.withdrawn_frame(id, req, reason, answered_by));
            fx.frame(ui, frame.clone());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        id: &str,
        req: Pending,
        outcome: Outcome,
        result: ToolResult,
        ui: Option<UiInfo>,
        now: Instant,
        fx: &mut Effects,
    ) {
        self.finish_with(id, req, outcome, result, BTreeMap::new(), ui, now, fx);
    }

    /// Sends the producer its one terminal frame and logs the outcome.
    #[allow(clippy::too_many_arguments)]
    fn finish_with(
        &mut self,
        id: &str,
        req: Pending,
        outcome: Outcome,
        result: ToolResult,
        answers: BTreeMap<usize, String>,
        ui: Option<UiInfo>,
        now: Instant,
        fx: &mut Effects,
    ) {
        self.stats.count_outcome(outcome);
        self.ended_shared(id, &req, outcome.as_str(), ui.as_ref(), fx);
        if !self.watchers.is_empty() {
            let latency = (now - req.accepted_at).as_millis() as u64;
            fx.events.push(event(
                outcome.as_str(),
                id,
                &req,
                ui.clone(),
                Some(latency),
                None,
            ));
        }
        let answered = match outcome {
            Outcome::Answered => Answered::Count(answers.len()),
            _ => Answered::None,
        };
        fx.records
            .push(record(id, outcome.as_str(), &req, ui, now, answered));
        let response = ProducerResponse {
            correlation_id: id.to_owned(),
            answers,
            cancelled: outcome != Outcome::Answered,
            reason: outcome,
            result,
        };
        fx.frame(req.producer, encode_fast::response(&response));
    }
}

enum Answered {
    None,
    Count(usize),
}

fn record(
    id: &str,
    reason: &'static str,
    req: &Pending,
    ui: Option<UiInfo>,
    now: Instant,
    answered: Answered,
) -> Record {
    let (dismissed, answer_count) = match answered {
        Answered::None => (true, 0),
        Answered::Count(n) => (false, n),
    };
    Record {
        ts: SystemTime::UNIX_EPOCH,
        node: None,
        correlation_id: Some(id.to_owned()),
        reason,
        code: None,
        producer: req.producer_info.clone(),
        ui,
        latency_ms: (now - req.accepted_at).as_millis() as u64,
        question_types: question_types(&req.meta),
        dismissed,
        empty_submission: matches!(answered, Answered::Count(0)),
        answer_count,
    }
}

fn event(
    kind: &str,
    id: &str,
    req: &Pending,
    ui: Option<UiInfo>,
    latency_ms: Option<u64>,
    timeout_ms: Option<u64>,
) -> BusEvent {
    BusEvent {
        event: kind.to_owned(),
        ts: String::new(),
        correlation_id: Some(id.to_owned()),
        producer: req.producer_info.clone(),
        ui,
        latency_ms,
        timeout_ms,
        question_types: question_types(&req.meta)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        headers: headers(&req.meta),
        code: None,
        node: req.origin.as_deref().map(str::to_owned),
    }
}

/// Each question's header, or `Q<i>` where it has none (as the reference labels answers).
fn headers(meta: &[QuestionMeta]) -> Vec<String> {
    meta.iter()
        .enumerate()
        .map(|(i, m)| m.header.clone().unwrap_or_else(|| format!("Q{i}")))
        .collect()
}

fn producer_info(info: &PeerInfo) -> ProducerInfo {
    ProducerInfo {
        client: info.client.clone(),
        pid: info.pid,
        uid: info.uid,
    }
}

fn encode_ui_request(id: &str, req: &Pending, now: Instant, node: Option<&str>) -> Bytes {
    UiRequestRef {
        correlation_id: id,
        questions: &req.questions,
        timeout_ms: req.deadline.saturating_duration_since(now).as_millis() as u64,
        producer: &req.producer_info,
        node,
    }
    .encode()
}

#[cfg(test)]
mod tests;
