//! How a request enters the broker: admission against the quotas (per connection, per uid,
//! bytes per uid, total), the no-UI policy, first delivery to the live UIs, and the refusals
//! (rejected requests are answered, counted and logged like every other end). A producer's
//! own cancel is here too: it is the other thing only the asker may do.

use std::sync::Arc;

use tokio::time::{Duration, Instant};

use super::peers::Cursor;
use super::pending::{self, Pending};
use super::{effects, Broker, BrokerError, Effects, PeerId, ValidRequest};
use crate::approvals::{ApprovalBody, ValidApproval};
use crate::protocol::{
    BusEventKind, End, FrameError, NoUiPolicy, RequestContext, RequestKind, TimeoutMs,
    WithdrawReason,
};
use crate::questions::{DaemonOutcome, QuestionMeta};

impl Broker {
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
