//! The broker: pending questions keyed by correlationId, which UIs have seen which, deadlines,
//! and the end of every request. Pure state: it never touches a socket and never awaits; each
//! operation appends what must be sent (and logged) to an [`Effects`], which the caller
//! delivers through the connections' bounded queues.
//!
//! - [`pending`]: the pending table, the one type that keeps a request and its indexes in step;
//! - [`peers`]: who each connection is and what it may do;
//! - [`request`]: a request validated outside the lock;
//! - [`effects`]: what an operation asks its caller to do;
//! - this file: the operations, each ending a request through one `finish`.

mod effects;
mod error;
mod peers;
pub mod pending;
mod remote;
mod request;
mod stats;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tokio::time::{Duration, Instant};

pub use effects::{Effects, Msg};
pub use error::BrokerError;
pub use peers::{PeerId, PeerInfo, Rights, RoleCounts};
pub use remote::{
    Acked, Answer, FedOut, FedPolicy, Forward, RemoteQuestion, RemoteRequest, SharedEnd,
    SharedQuestion,
};
pub use request::ValidRequest;
pub use stats::{ApprovalStats, BrokerStats};

use peers::{Cursor, Peer};
use pending::{Pending, PendingTable};

use crate::approvals::{self, ApprovalBody, ValidApproval};
use crate::protocol::{
    encode, encode_fast, ApprovalResponse, AskUserResponse, BusEventKind, Decision, End,
    FrameError, NoUiPolicy, Outcome, ProducerResponse, RequestContext, RequestKind, ServerFrame,
    SubscribeFilter, TimeoutMs, ToolConfirmationResponse, ToolOutcome, UiInfo, WithdrawReason,
};
use crate::questions::{self, DaemonOutcome, QuestionMeta, ToolResult};

/// The largest tool result the broker builds for an answer (the response frame stays under
/// the 16 MiB clients accept).
pub const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

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
    /// Bytes the pending questions of one uid may hold (their normalized text and ids): a
    /// count alone lets one user pin gigabytes with large questions.
    pub max_pending_bytes_per_uid: usize,
    pub max_pending_total: usize,
}

/// The default of [`Limits::max_pending_bytes_per_uid`]: 64 MiB, 64 questions of the largest
/// frame askbusd accepts by default, thousands of ordinary ones.
pub const DEFAULT_MAX_PENDING_BYTES_PER_UID: usize = 64 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_timeout_ms: 600_000,
            max_timeout_ms: 86_400_000,
            no_ui: NoUiPolicy::Wait,
            max_pending_per_connection: 128,
            max_pending_per_uid: 262_144,
            max_pending_bytes_per_uid: DEFAULT_MAX_PENDING_BYTES_PER_UID,
            max_pending_total: 262_144,
        }
    }
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
    pending: PendingTable,
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
            pending: PendingTable::default(),
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
        self.pending.producers() - usize::from(self.remote_len > 0)
    }

    pub fn connect(&mut self, peer: PeerId, info: PeerInfo) {
        self.peers.insert(
            peer,
            Peer {
                info,
                ui: None,
                asked: false,
                filter: SubscribeFilter::default(),
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
        for (seq, id, req) in self.pending.iter() {
            if !cursor.has_seen(seq) {
                break;
            }
            let uid = req.producer_info.uid;
            let wanted = self.peers[&peer].filter.matches(req.context.as_deref());
            match (before.sees(uid) && wanted, after.sees(uid) && wanted) {
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
        if self.peers.remove(&peer).is_none() {
            return;
        }
        self.uis.remove(&peer);
        self.watchers.remove(&peer);
        for id in self.pending.owned_by(peer) {
            let req = self.take(&id, WithdrawReason::ProducerGone, None, None, fx);
            // No one is left to tell: counted and logged like every other end.
            self.count_end(End::ProducerGone, &id, &req, None, now, None, None, fx);
        }
    }

    /// Makes `peer` a UI. It is sent `subscribed` with the pending count now, then (through
    /// `replay`) every pending request oldest first, then live ones.
    pub fn subscribe(
        &mut self,
        peer: PeerId,
        client: Option<String>,
        filter: SubscribeFilter,
        fx: &mut Effects,
    ) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        if !p.info.rights.ui {
            let err = BrokerError::NotAUi(p.info.uid);
            fx.error(peer, FrameError::new(err.code(), err.to_string()));
            return;
        }
        // What a UI subscribing again had and no longer asks for leaves its screen.
        if let Some(cursor) = p.ui.filter(|_| p.filter != filter) {
            for (seq, id, req) in self.pending.iter() {
                if cursor.has_seen(seq) && p.shown(req) && !filter.matches(req.context.as_deref()) {
                    fx.frame(peer, encode_fast::withdrawn(id, WithdrawReason::Withdrawn));
                }
            }
        }
        // The count of what this UI will be replayed: other users' questions stay unseen, and
        // so do those its filter leaves out.
        let visible = if !filter.is_empty() {
            self.pending
                .iter()
                .filter(|(_, _, r)| p.info.sees(r.producer_info.uid))
                .filter(|(_, _, r)| filter.matches(r.context.as_deref()))
                .count()
        } else if p.info.rights.operator {
            self.pending.len()
        } else {
            self.pending.count_of_uid(p.info.uid)
        };
        let p = self.peers.get_mut(&peer).expect("checked above");
        if client.is_some() {
            p.info.client = client;
        }
        p.filter = filter;
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
        // Other users' questions, and those its filter leaves out, are passed over (the cursor
        // moves past them) unseen.
        let mut cursor = last;
        let mut sent = 0;
        let mut more = false;
        for (seq, id, req) in self.pending.after(last) {
            if p.shown(req) {
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
    pub fn reject(
        &mut self,
        peer: PeerId,
        id: &str,
        context: Option<&RequestContext>,
        err: BrokerError,
        fx: &mut Effects,
    ) {
        let err = err.into_frame_error(id);
        self.reject_with(peer, Some(id), err, Asked::Questions(&[]), context, fx);
    }

    /// An approval whose tool call, details or outcomes `approvals::check` refused.
    pub fn reject_approval(
        &mut self,
        peer: PeerId,
        id: &str,
        context: Option<&RequestContext>,
        message: String,
        fx: &mut Effects,
    ) {
        let err = BrokerError::InvalidApproval(message).into_frame_error(id);
        self.reject_with(peer, Some(id), err, Asked::Approval(None), context, fx);
    }

    /// A request refused while parsing its own fields (correlationId, timeoutMs, noUi,
    /// context): answered and logged like any rejected request, with the id when it had one.
    pub fn reject_malformed(&mut self, peer: PeerId, err: FrameError, fx: &mut Effects) {
        let id = err.correlation_id.clone();
        let asked = match err.request {
            Some(RequestKind::Approval) => Asked::Approval(None),
            _ => Asked::Questions(&[]),
        };
        self.reject_with(peer, id.as_deref(), err, asked, None, fx);
    }

    fn reject_with(
        &mut self,
        peer: PeerId,
        id: Option<&str>,
        err: FrameError,
        asked: Asked<'_>,
        context: Option<&RequestContext>,
        fx: &mut Effects,
    ) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        self.stats.count(End::Rejected);
        let (meta, facts) = match asked {
            Asked::Questions(meta) => (meta, None),
            Asked::Approval(body) => {
                self.stats.approvals.count(End::Rejected, None);
                (&[][..], Some(effects::approval_facts(body, None)))
            }
        };
        let facts = facts.as_ref();
        if !self.watchers.is_empty() {
            let event = effects::rejected_event(id, err.code, &p.info, meta, context, facts);
            fx.events.push(event);
        }
        let record = effects::rejected_record(id, err.code, &p.info, meta, context, facts);
        fx.records.push(record);
        fx.error(peer, err);
    }

    /// A producer asks with a validated request. Exactly one of: an error frame (rejected),
    /// an immediate `no-ui` response, or the request becomes pending and goes to every UI.
    pub fn ask(&mut self, peer: PeerId, req: ValidRequest, now: Instant, fx: &mut Effects) {
        let envelope = (req.correlation_id, req.timeout_ms, req.no_ui, req.context);
        self.admit(peer, envelope, req.questions, req.meta, None, now, fx);
    }

    /// A producer asks for an approval: as `ask`, with the same quotas, deadlines and ends.
    pub fn ask_approval(
        &mut self,
        peer: PeerId,
        req: ValidApproval,
        now: Instant,
        fx: &mut Effects,
    ) {
        let envelope = (req.correlation_id, req.timeout_ms, req.no_ui, req.context);
        let body = Some(Box::new(req.body));
        self.admit(peer, envelope, Box::from(""), Vec::new(), body, now, fx);
    }

    #[allow(clippy::too_many_arguments)]
    fn admit(
        &mut self,
        peer: PeerId,
        (id, timeout, no_ui, context): Envelope,
        questions: Box<str>,
        meta: Vec<QuestionMeta>,
        approval: Option<Box<ApprovalBody>>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let producer_info = effects::producer_info(&p.info);
        let owned = self.pending.count_of_producer(peer);
        let (uid, may_produce) = (p.info.uid, p.info.rights.produce);
        self.peers.get_mut(&peer).expect("checked above").asked = true;
        let refusal = if !may_produce {
            Some(BrokerError::NotAProducer(uid))
        } else if self.pending.contains(&id) {
            Some(BrokerError::DuplicateCorrelationId(id.clone()))
        } else if owned >= self.limits.max_pending_per_connection {
            Some(BrokerError::TooManyPendingForConnection(
                self.limits.max_pending_per_connection,
            ))
        } else if self.pending.count_of_uid(uid) - self.remote_pending_of(uid)
            >= self.limits.max_pending_per_uid
        {
            Some(BrokerError::TooManyPendingForUid {
                uid,
                limit: self.limits.max_pending_per_uid,
            })
        } else if let Some(err) = self.over_byte_budget(uid, &id, &questions, approval.as_deref()) {
            Some(err)
        } else if self.pending.len() - self.remote_len >= self.limits.max_pending_total {
            Some(BrokerError::TooManyPendingTotal(
                self.limits.max_pending_total,
            ))
        } else {
            None
        };
        if let Some(err) = refusal {
            let asked = match &approval {
                Some(body) => Asked::Approval(Some(body)),
                None => Asked::Questions(&meta),
            };
            let err = err.into_frame_error(&id);
            return self.reject_with(peer, Some(&id), err, asked, context.as_ref(), fx);
        }
        let max = self.limits.max_timeout_ms;
        let timeout_ms = timeout.map_or(self.limits.default_timeout_ms.min(max), |t| t.clamp(max));
        self.stats.accepted += 1;
        if approval.is_some() {
            self.stats.approvals.accepted += 1;
        }
        let pending = Pending {
            seq: self.pending.next_seq(),
            producer: peer,
            producer_info,
            context: context.map(Box::new),
            questions,
            meta,
            approval,
            accepted_at: now,
            deadline: now + Duration::from_millis(timeout_ms),
            timeout_ms,
            origin: None,
            shared: false,
        };
        if self.closed {
            return self.end_unanswered(&id, pending, DaemonOutcome::Shutdown, now, fx);
        }
        let no_ui = no_ui.unwrap_or(self.limits.no_ui);
        // "No UI" means none that would be shown it: a UI of another user, or one whose filter
        // leaves it out, will never answer it.
        let any_ui = self.uis.iter().any(|ui| self.peers[ui].shown(&pending));
        if !any_ui && no_ui == NoUiPolicy::Reject {
            return self.end_unanswered(&id, pending, DaemonOutcome::NoUi, now, fx);
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
                p.ui == Some(Cursor::Live) && p.shown(&pending)
            })
            .collect();
        if !live.is_empty() {
            let frame = self.ui_frame(&id, &pending, now);
            for ui in live {
                fx.frame(ui, frame.clone());
            }
        }
        if !self.watchers.is_empty() {
            fx.events.push(effects::event(
                BusEventKind::Request,
                &id,
                &pending,
                None,
                None,
                Some(timeout_ms),
                None,
            ));
        }
        self.pending.insert(id, pending);
    }

    /// The refusal of a request that would take its uid past `max_pending_bytes_per_uid`.
    fn over_byte_budget(
        &self,
        uid: u32,
        id: &str,
        questions: &str,
        approval: Option<&ApprovalBody>,
    ) -> Option<BrokerError> {
        let bytes = pending::bytes_of(id, questions, approval);
        let uid_bytes = self.pending.bytes_of_uid(uid);
        (uid_bytes.saturating_add(bytes) > self.limits.max_pending_bytes_per_uid).then_some(
            BrokerError::TooManyPendingBytesForUid {
                uid,
                held: uid_bytes,
                size: bytes,
                limit: self.limits.max_pending_bytes_per_uid,
            },
        )
    }

    /// The producer withdraws a question it asked.
    pub fn cancel(&mut self, peer: PeerId, id: &str, now: Instant, fx: &mut Effects) {
        self.cancel_kind(peer, id, RequestKind::Question, now, fx);
    }

    /// The producer withdraws an approval it asked.
    pub fn cancel_approval(&mut self, peer: PeerId, id: &str, now: Instant, fx: &mut Effects) {
        self.cancel_kind(peer, id, RequestKind::Approval, now, fx);
    }

    /// `kind` names the cancel frame the producer sent: it withdraws only its own kind.
    fn cancel_kind(
        &mut self,
        peer: PeerId,
        id: &str,
        kind: RequestKind,
        now: Instant,
        fx: &mut Effects,
    ) {
        let owned = self.pending.get(id).is_some_and(|r| {
            r.producer == peer && r.approval.is_some() == (kind == RequestKind::Approval)
        });
        if !owned {
            // Another producer's question is "not pending" for this one: nothing leaks.
            fx.error(
                peer,
                BrokerError::NotPending(id.to_owned()).into_frame_error(id),
            );
            return;
        }
        let req = self.take(id, WithdrawReason::Withdrawn, None, None, fx);
        self.end_unanswered(id, req, DaemonOutcome::Withdrawn, now, fx);
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
        if !ui.shown(req) {
            let err = BrokerError::OutsideFilter(id.to_owned());
            fx.error(peer, err.into_frame_error(id));
            return;
        }
        if req.approval.is_some() {
            let err = BrokerError::WrongKind {
                id: id.to_owned(),
                kind: RequestKind::Approval,
            };
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
            let answer = remote::Answer::Question(resp);
            return self.forward(peer, origin, answer, answered_by, fx);
        }
        let req = self.take(
            id,
            WithdrawReason::Answered,
            Some(peer),
            Some(&answered_by),
            fx,
        );
        let ending = if resp.cancelled {
            Ending {
                outcome: Outcome::Dismissed,
                result: questions::dismissed_result(&req.meta),
                answers: BTreeMap::new(),
                ui: Some(answered_by),
            }
        } else {
            Ending {
                outcome: Outcome::Answered,
                result: questions::answered_result(&req.meta, &resp.answers),
                answers: resp.answers,
                ui: Some(answered_by),
            }
        };
        fx.frame(peer, encode_fast::ack(id, ending.outcome));
        self.stats.record_latency(now - req.accepted_at);
        self.finish(id, req, ending, now, fx);
    }

    /// Times out every request whose deadline is at or before `now`.
    pub fn expire(&mut self, now: Instant, fx: &mut Effects) {
        while let Some(id) = self.pending.first_due(now) {
            let req = self.take(&id, WithdrawReason::Timeout, None, None, fx);
            if req.origin.is_some() {
                // Its origin's end never came (it is checked a grace after the deadline).
                continue;
            }
            self.end_unanswered(&id, req, DaemonOutcome::Timeout, now, fx);
        }
    }

    /// When the next request times out, if any is pending.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.next_deadline()
    }

    /// Every pending producer gets `shutdown`, every UI `ask-user-withdrawn` `shutdown`.
    pub fn shutdown(&mut self, now: Instant, fx: &mut Effects) {
        self.closed = true;
        for id in self.pending.ids() {
            let req = self.take(&id, WithdrawReason::Shutdown, None, None, fx);
            if req.origin.is_some() {
                continue;
            }
            self.end_unanswered(&id, req, DaemonOutcome::Shutdown, now, fx);
        }
    }

    /// Takes a pending request out of the table and tells every UI that was sent it (but
    /// `except`, the one whose answer ended it) that it is gone, with `reason`.
    fn take(
        &mut self,
        id: &str,
        reason: WithdrawReason,
        except: Option<PeerId>,
        answered_by: Option<&UiInfo>,
        fx: &mut Effects,
    ) -> Pending {
        let req = self
            .pending
            .remove(id)
            .expect("caller checked it is pending");
        if req.origin.is_some() {
            self.remote_len -= 1;
        }
        self.withdraw(id, &req, reason, except, answered_by, fx);
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
        let mut frame = None;
        for &ui in &self.uis {
            let p = &self.peers[&ui];
            if Some(ui) == except || !p.ui.is_some_and(|c| c.has_seen(req.seq)) || !p.shown(req) {
                continue;
            }
            let frame =
                frame.get_or_insert_with(|| self.withdrawn_frame(id, req, reason, answered_by));
            fx.frame(ui, frame.clone());
        }
    }

    /// Sends the producer its one terminal frame, and counts and logs the end.
    fn finish(&mut self, id: &str, req: Pending, ending: Ending, now: Instant, fx: &mut Effects) {
        let Ending {
            outcome,
            result,
            answers,
            ui,
        } = ending;
        let answer_count = (outcome == Outcome::Answered).then_some(answers.len());
        self.count_end(outcome.into(), id, &req, ui, now, answer_count, None, fx);
        let response = ProducerResponse {
            correlation_id: id.to_owned(),
            answers,
            cancelled: outcome != Outcome::Answered,
            reason: outcome,
            result,
        };
        fx.frame(req.producer, encode_fast::response(&response));
    }

    /// Counts a pending request's end and tells the watchers and telemetry.
    #[allow(clippy::too_many_arguments)]
    fn count_end(
        &mut self,
        end: End,
        id: &str,
        req: &Pending,
        ui: Option<UiInfo>,
        now: Instant,
        answer_count: Option<usize>,
        told: Option<&ApprovalResponse>,
        fx: &mut Effects,
    ) {
        self.stats.count(end);
        if req.approval.is_some() {
            let decision = told
                .filter(|r| r.reason == Outcome::Answered)
                .map(|r| r.outcome);
            self.stats.approvals.count(end, decision);
        }
        self.ended_shared(id, req, end.as_str(), ui.as_ref(), fx);
        if !self.watchers.is_empty() {
            let latency = (now - req.accepted_at).as_millis() as u64;
            let kind = BusEventKind::End(end);
            fx.events.push(effects::event(
                kind,
                id,
                req,
                ui.clone(),
                Some(latency),
                None,
                told,
            ));
        }
        fx.records
            .push(effects::record(id, end, req, ui, now, answer_count, told));
    }
    /// A UI decides an approval. The first valid decision wins, as for questions.
    pub fn decide(
        &mut self,
        peer: PeerId,
        resp: ToolConfirmationResponse,
        now: Instant,
        fx: &mut Effects,
    ) {
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
            let err = BrokerError::NotPending(id.to_owned());
            fx.error(peer, err.into_frame_error(id));
            return;
        };
        if !ui.info.sees(req.producer_info.uid) {
            let err = BrokerError::ForeignQuestion(id.to_owned());
            fx.error(peer, err.into_frame_error(id));
            return;
        }
        if !ui.shown(req) {
            let err = BrokerError::OutsideFilter(id.to_owned());
            fx.error(peer, err.into_frame_error(id));
            return;
        }
        let Some(body) = &req.approval else {
            let err = BrokerError::WrongKind {
                id: id.to_owned(),
                kind: RequestKind::Question,
            };
            fx.error(peer, err.into_frame_error(id));
            return;
        };
        if let Err(err) = self.offered(id, body, &resp) {
            fx.error(peer, err);
            return;
        }
        let answered_by = UiInfo {
            client: ui.info.client.clone(),
            pid: ui.info.pid,
            node: self.fed.as_ref().map(|f| f.node.to_string()),
        };
        if let Some(origin) = req.origin.clone() {
            // The origin decides; this UI learns the outcome from its reply. Until then the
            // approval stays pending: a decision that never arrives approves nothing.
            let answer = remote::Answer::Approval(resp);
            return self.forward(peer, origin, answer, answered_by, fx);
        }
        let id = id.to_owned();
        let acked = self.decided(&id, resp, answered_by, Some(peer), now, fx);
        fx.frame(peer, acked.frame(&id));
    }

    /// Refuses a decision whose outcome the approval does not offer.
    fn offered(
        &self,
        id: &str,
        body: &ApprovalBody,
        resp: &ToolConfirmationResponse,
    ) -> Result<(), FrameError> {
        if let Decision::Decided { outcome, .. } = &resp.decision {
            if !body.outcomes.contains(outcome) {
                let err = BrokerError::OutcomeNotOffered {
                    outcome: *outcome,
                    offered: body.outcomes.clone(),
                };
                return Err(err.into_frame_error(id));
            }
        }
        Ok(())
    }

    /// Ends a pending approval with a UI's checked decision (`winner`: the local UI that
    /// made it, left out of the withdrawal); returns the ack that UI is owed.
    fn decided(
        &mut self,
        id: &str,
        resp: ToolConfirmationResponse,
        answered_by: UiInfo,
        winner: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) -> remote::Acked {
        let req = self.take(id, WithdrawReason::Answered, winner, Some(&answered_by), fx);
        let (reason, outcome, message, payload) = match resp.decision {
            Decision::Dismissed => {
                let message = approvals::daemon_message(Outcome::Dismissed, req.timeout_ms);
                (Outcome::Dismissed, ToolOutcome::Cancel, message, None)
            }
            Decision::Decided {
                outcome,
                message,
                payload,
            } => (Outcome::Answered, outcome, message, payload),
        };
        let confirmed = reason == Outcome::Answered && outcome.confirms();
        let latency = now - req.accepted_at;
        self.stats.record_latency(latency);
        self.stats.approvals.record_latency(latency);
        let response = ApprovalResponse {
            correlation_id: id.to_owned(),
            confirmed,
            outcome,
            reason,
            message,
            payload,
        };
        self.finish_approval(req, response, Some(answered_by), now, fx);
        remote::Acked::Approval {
            reason,
            confirmed,
            outcome,
        }
    }

    /// Ends a request nobody answered (timeout, no-ui, withdrawn, shutdown): for an approval
    /// never a confirmation, and its producer is told why.
    fn end_unanswered(
        &mut self,
        id: &str,
        req: Pending,
        outcome: DaemonOutcome,
        now: Instant,
        fx: &mut Effects,
    ) {
        if req.approval.is_none() {
            let ending = Ending::daemon(&req, outcome);
            return self.finish(id, req, ending, now, fx);
        }
        let reason = Ending::outcome_of(outcome);
        let response = ApprovalResponse {
            correlation_id: id.to_owned(),
            confirmed: false,
            outcome: ToolOutcome::Cancel,
            reason,
            message: approvals::daemon_message(reason, req.timeout_ms),
            payload: None,
        };
        self.finish_approval(req, response, None, now, fx);
    }

    /// Sends an approval's producer its one terminal frame, and counts and logs the end.
    fn finish_approval(
        &mut self,
        req: Pending,
        response: ApprovalResponse,
        ui: Option<UiInfo>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let id = response.correlation_id.as_str();
        let end = End::from(response.reason);
        self.count_end(end, id, &req, ui, now, None, Some(&response), fx);
        let frame = encode(&ServerFrame::ToolConfirmationResponse(response));
        fx.frame(req.producer, frame);
    }
}

/// What a request was, for the record and event of its rejection.
#[derive(Clone, Copy)]
enum Asked<'a> {
    Questions(&'a [QuestionMeta]),
    /// An approval, with its body once it was known.
    Approval(Option<&'a ApprovalBody>),
}

/// A request's envelope: correlationId, timeoutMs, noUi and context.
type Envelope = (
    String,
    Option<TimeoutMs>,
    Option<NoUiPolicy>,
    Option<RequestContext>,
);

/// How a pending request ends, with what its producer is told.
struct Ending {
    outcome: Outcome,
    result: ToolResult,
    /// An answered request's answers (empty for every other outcome).
    answers: BTreeMap<usize, String>,
    /// The UI whose answer or dismissal ended it.
    ui: Option<UiInfo>,
}

impl Ending {
    /// One of the daemon's own outcomes, which no UI chose.
    fn daemon(req: &Pending, outcome: DaemonOutcome) -> Ending {
        Ending {
            outcome: Ending::outcome_of(outcome),
            result: questions::daemon_result(&req.meta, outcome, req.timeout_ms),
            answers: BTreeMap::new(),
            ui: None,
        }
    }

    fn outcome_of(outcome: DaemonOutcome) -> Outcome {
        match outcome {
            DaemonOutcome::Timeout => Outcome::Timeout,
            DaemonOutcome::NoUi => Outcome::NoUi,
            DaemonOutcome::Withdrawn => Outcome::Withdrawn,
            DaemonOutcome::Shutdown => Outcome::Shutdown,
        }
    }
}

#[cfg(test)]
mod tests;
