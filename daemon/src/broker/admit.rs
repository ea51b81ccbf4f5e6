//! How a request enters the broker: admission against the quotas (per connection, per uid,
//! bytes per uid, total), the no-UI policy, first delivery to the live UIs, and the refusals
//! (rejected requests are answered, counted and logged like every other end). A producer's
//! own cancel is here too: it is the other thing only the asker may do.

use std::sync::Arc;

use tokio::time::{Duration, Instant};

use super::body::{Body, Origin};
use super::durable::{AskedRecord, Decider, Durable};
use super::end::Ended;
use super::peers::Cursor;
use super::pending::{self, Pending};
use super::{effects, Broker, BrokerError, Effects, PeerId, Valid};
use crate::protocol::{
    BusEventKind, CancelReason, End, FrameError, NoUiPolicy, RequestContext, RequestKind,
    WithdrawReason,
};
use crate::questions::DaemonOutcome;

impl Broker {
    /// A request of `kind` the door (`crate::intake`) refused: its own fields, its questions or
    /// its approval. The producer gets the error (with the request's id when it had a usable
    /// one), and the rejection is logged like every other end.
    pub fn reject(
        &mut self,
        peer: PeerId,
        kind: RequestKind,
        context: Option<&RequestContext>,
        err: FrameError,
        fx: &mut Effects,
    ) {
        let id = err.correlation_id.clone();
        self.reject_with(peer, id.as_deref(), err, Asked::Kind(kind), context, fx);
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
        let body = match asked {
            Asked::Body(body) => Some(body),
            Asked::Kind(_) => None,
        };
        let producer = effects::producer_info(&p.info);
        let facts = effects::Facts::refused(id, producer, context, asked.kind(), body);
        if asked.kind() == RequestKind::Approval {
            self.stats.approvals.count_decided(End::Rejected, None);
        }
        let code = Some(err.code);
        if !self.watchers.is_empty() {
            let kind = BusEventKind::End(End::Rejected);
            fx.events
                .push(effects::event(&facts, kind, code, None, None, None));
        }
        fx.records
            .push(effects::record(&facts, End::Rejected, code, None, 0, None));
        fx.error(peer, err);
    }

    /// A producer asks with a validated request, of either kind. Exactly one of: an error
    /// frame (rejected), an immediate `no-ui` response, or the request becomes pending and
    /// goes to every UI.
    pub fn ask(&mut self, peer: PeerId, req: impl Into<Valid>, now: Instant, fx: &mut Effects) {
        let Valid {
            correlation_id: id,
            timeout_ms: timeout,
            no_ui,
            context,
            body,
        } = req.into();
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let producer_info = effects::producer_info(&p.info);
        let owned = self.pending.count_of_producer(peer);
        let (uid, may_produce) = (p.info.uid, p.info.rights.produce);
        self.peers.get_mut(&peer).expect("checked above").asked = true;
        let taken = self.pending.contains(&id) || self.is_owed(&id);
        if taken && may_produce && self.reattach(peer, uid, &id, &body, fx) {
            // The same request again from its producer, back after a restart or a dropped
            // connection: it carries on (the original deadline stands).
            return;
        }
        let refusal = if !may_produce {
            Some(BrokerError::NotAProducer(uid))
        } else if taken {
            Some(BrokerError::DuplicateCorrelationId(id.clone()))
        } else if self.store_unwritable() {
            Some(BrokerError::StoreUnavailable)
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
        } else if let Some(err) = self.over_byte_budget(uid, &id, &body) {
            Some(err)
        } else if self.pending.len() - self.remote_len >= self.limits.max_pending_total {
            Some(BrokerError::TooManyPendingTotal(
                self.limits.max_pending_total,
            ))
        } else {
            None
        };
        if let Some(err) = refusal {
            let err = err.into_frame_error(&id);
            let asked = Asked::Body(&body);
            return self.reject_with(peer, Some(&id), err, asked, context.as_ref(), fx);
        }
        let max = self.limits.max_timeout_ms;
        let timeout_ms = timeout.map_or(self.limits.default_timeout_ms.min(max), |t| t.clamp(max));
        self.stats.accepted += 1;
        if body.kind() == RequestKind::Approval {
            self.stats.approvals.accepted += 1;
        }
        let mut pending = Pending {
            seq: self.pending.next_seq(),
            origin: Origin::local(peer),
            producer_info,
            context: context.map(Box::new),
            body,
            accepted_at: now,
            deadline: now + Duration::from_millis(timeout_ms),
            timeout_ms,
        };
        if self.durable.is_some() {
            fx.durable.push(Durable::Asked(Box::new(AskedRecord {
                id: Arc::from(id.as_str()),
                body: pending.body.clone(),
                producer: pending.producer_info.clone(),
                context: pending.context.clone(),
                accepted_at: now,
                deadline: pending.deadline,
                timeout_ms,
            })));
        }
        if self.closed {
            let ended = Ended::unanswered(&id, &pending, DaemonOutcome::Shutdown);
            return self.end(&id, pending, ended, now, fx);
        }
        if let Some(verdict) = self.policy_verdict(uid, &pending) {
            return self.end_by_rule(&id, pending, verdict, now, fx);
        }
        let no_ui = no_ui.unwrap_or(self.limits.no_ui);
        // "No UI" means none that would be shown it: a UI of another user, or one whose filter
        // leaves it out, will never answer it.
        let any_ui = self.uis.iter().any(|ui| self.peers[ui].shown(&pending));
        if !any_ui && no_ui == NoUiPolicy::Reject {
            let ended = Ended::unanswered(&id, &pending, DaemonOutcome::NoUi);
            return self.end(&id, pending, ended, now, fx);
        }
        let id: Arc<str> = Arc::from(id);
        self.share(&id, &mut pending, fx);
        self.announce(id, pending, now, fx);
    }

    /// Asks the policy rules about a local approval; `None`: a person decides.
    fn policy_verdict(
        &self,
        uid: u32,
        pending: &Pending,
    ) -> Option<askbus_policy::daemon::Verdict> {
        let decide = self.policy.as_ref()?;
        let Body::Approval(a) = &pending.body else {
            return None;
        };
        let ctx = pending.context.as_deref();
        decide.decide(&askbus_policy::daemon::Approval {
            uid,
            tool_call: &a.tool_call,
            server: a.server_name.as_deref(),
            annotations: a.tool_annotations.as_deref(),
            subagent: a.subagent.as_deref(),
            cwd: ctx.and_then(|c| c.cwd.as_deref()),
            project: ctx.and_then(|c| c.project.as_deref()),
            mode: ctx.and_then(|c| c.approval_mode).map(|m| m.as_str()),
            interactive: ctx.and_then(|c| c.interactive),
            agent: ctx.and_then(|c| c.agent.as_deref()),
        })
    }

    /// Ends an approval a rule decided: allow is `proceed_once`, deny `cancel` with the
    /// rule's message; recorded like a person's answer, by the UI `policy` (the rule's source).
    fn end_by_rule(
        &mut self,
        id: &str,
        pending: Pending,
        verdict: askbus_policy::daemon::Verdict,
        now: Instant,
        fx: &mut Effects,
    ) {
        use crate::protocol::{ApprovalResponse, Outcome, ToolOutcome};
        let allow = verdict.decision == askbus_policy::Decision::Allow;
        self.policy_decisions[usize::from(!allow)] += 1;
        let source = verdict
            .rule
            .get("source")
            .and_then(|s| s.as_str())
            .unwrap_or("default");
        let by = crate::protocol::UiInfo {
            client: Some(format!("policy ({source})")),
            pid: None,
            node: self.fed.as_ref().map(|f| f.node.to_string()),
        };
        let told = super::body::Told::Approval(ApprovalResponse {
            correlation_id: id.to_owned(),
            confirmed: allow,
            outcome: if allow {
                ToolOutcome::ProceedOnce
            } else {
                ToolOutcome::Cancel
            },
            reason: Outcome::Answered,
            message: if allow { None } else { verdict.message },
            payload: None,
        });
        let decider = super::Decider {
            rule: Some(verdict.rule.clone()),
            ..super::Decider::default()
        };
        let ended = super::end::Ended::by_ui(End::from(Outcome::Answered), by, told, Some(decider));
        self.end(id, pending, ended, now, fx);
    }

    /// A request that becomes pending, local or remote: sent to the live UIs that are shown
    /// it (catching-up ones reach it through their replay), told to the watchers, and kept.
    pub(super) fn announce(
        &mut self,
        id: Arc<str>,
        pending: Pending,
        now: Instant,
        fx: &mut Effects,
    ) {
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
            let facts = effects::Facts::of(&id, &pending, None);
            let timeout_ms = Some(pending.timeout_ms);
            let kind = BusEventKind::Request;
            fx.events
                .push(effects::event(&facts, kind, None, None, None, timeout_ms));
        }
        if pending.origin.is_remote() {
            self.remote_len += 1;
        }
        if pending.origin.is_shared() {
            self.shared_len += 1;
        }
        self.pending.insert(id, pending);
    }

    /// The refusal of a request that would take its uid past `max_pending_bytes_per_uid`.
    fn over_byte_budget(&self, uid: u32, id: &str, body: &Body) -> Option<BrokerError> {
        let bytes = pending::bytes_of(id, body);
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
        let why = CancelReason::Withdrawn;
        self.cancel_because(peer, id, RequestKind::Question, why, now, fx);
    }

    /// The producer withdraws an approval it asked.
    pub fn cancel_approval(&mut self, peer: PeerId, id: &str, now: Instant, fx: &mut Effects) {
        let why = CancelReason::Withdrawn;
        self.cancel_because(peer, id, RequestKind::Approval, why, now, fx);
    }

    /// The producer withdraws a request of `kind` it asked (the cancel frame it sent names
    /// the kind: it withdraws only its own kind), saying why. Its producer and UIs are told
    /// `withdrawn` either way; a request `answered-elsewhere` is recorded as a person's
    /// decision (`decidedBy` `human`, `via` as the producer claimed), made outside askbus.
    pub fn cancel_because(
        &mut self,
        peer: PeerId,
        id: &str,
        kind: RequestKind,
        why: CancelReason,
        now: Instant,
        fx: &mut Effects,
    ) {
        let owned = self
            .pending
            .get(id)
            .is_some_and(|r| r.origin.producer() == Some(peer) && r.body.kind() == kind);
        if !owned {
            // Another producer's question is "not pending" for this one: nothing leaks.
            fx.error(
                peer,
                BrokerError::NotPending(id.to_owned()).into_frame_error(id),
            );
            return;
        }
        let req = self.take(id, WithdrawReason::Withdrawn, None, None, fx);
        let mut ended = Ended::unanswered(id, &req, DaemonOutcome::Withdrawn);
        if let CancelReason::AnsweredElsewhere { via } = why {
            ended.decider = Some(Decider {
                uid: Some(req.producer_info.uid),
                via: Some(via.unwrap_or_else(|| "client".into())),
                user: None,
                rule: None,
                elsewhere: true,
            });
        }
        self.end(id, req, ended, now, fx);
    }
}

/// What a refused request was, for the record and event of its rejection: its body once it
/// was known, else only its kind.
#[derive(Clone, Copy)]
enum Asked<'a> {
    Kind(RequestKind),
    Body(&'a Body),
}

impl Asked<'_> {
    fn kind(self) -> RequestKind {
        match self {
            Asked::Kind(kind) => kind,
            Asked::Body(body) => body.kind(),
        }
    }
}
