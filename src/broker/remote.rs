//! The broker's side of federation: which local questions are shared, remote questions as
//! one more kind of pending request (asked by a peer that is another node), answers to them
//! forwarded to their origin, and answers from other nodes' UIs to questions asked here. Pure
//! state like the rest of the broker: what must cross NATS is appended to
//! `Effects::federation` for the federation task, which never runs under the broker's lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use tokio::time::{Duration, Instant};

use super::peers::Cursor;
use super::pending::{bytes_of, Pending};
use super::{
    effects, Broker, BrokerError, Effects, Ending, PeerId, ValidRequest, MAX_RESULT_BYTES,
};
use crate::approvals::{ApprovalBody, ValidApproval};
use crate::protocol::{
    encode_fast, encode_with, json, AskUserResponse, BusEventKind, End, FrameError, Outcome,
    ProducerInfo, RequestContext, ToolConfirmationResponse, UiInfo, UiRequestRef, WithdrawReason,
};
use crate::questions;

/// The `producer` of a remote question: no connection has this id (they start at 1).
pub const REMOTE: PeerId = 0;

/// How long after its origin's deadline a remote question is dropped if its end never came.
pub const REMOTE_GRACE: Duration = Duration::from_secs(5);

/// Which questions this node shares and shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FedPolicy {
    pub node: Arc<str>,
    /// Share the questions of producers of these uids.
    pub share_uids: BTreeSet<u32>,
    /// Show remote questions at all.
    pub accept: bool,
    /// Show only the questions of these nodes (empty: every node's).
    pub accept_nodes: BTreeSet<String>,
    /// Remote questions are shown as if asked by this uid (the daemon's own, by default): the
    /// UIs that see that uid's questions see them.
    pub shown_as_uid: u32,
}

/// A local question the other nodes are to show.
#[derive(Debug, Clone)]
pub struct SharedQuestion {
    pub id: Arc<str>,
    /// The normalized questions' JSON text.
    pub questions: Box<str>,
    pub producer: ProducerInfo,
    pub context: Option<Box<RequestContext>>,
    pub timeout_ms: u64,
    /// Time left before its deadline.
    pub remaining: Duration,
    /// `Some` for an approval (then `questions` is empty).
    pub approval: Option<Box<ApprovalBody>>,
}

/// The end of a shared question.
#[derive(Debug, Clone)]
pub struct SharedEnd {
    pub id: Arc<str>,
    pub reason: &'static str,
    pub answered_by: Option<UiInfo>,
    /// When a remote UI won: its connection on its node (`Forward::ui` there), so that node
    /// can leave the winner out of the withdrawal.
    pub winner_peer: Option<PeerId>,
}

/// A UI's answer to a question or its decision on an approval.
#[derive(Debug, Clone)]
pub enum Answer {
    Question(AskUserResponse),
    Approval(ToolConfirmationResponse),
}

impl Answer {
    pub fn correlation_id(&self) -> &str {
        match self {
            Answer::Question(r) => &r.correlation_id,
            Answer::Approval(r) => &r.correlation_id,
        }
    }
}

/// What the origin told the UI whose answer it took: `ask-user-ack` or
/// `tool-confirmation-ack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    Question(Outcome),
    Approval {
        reason: Outcome,
        confirmed: bool,
        outcome: crate::protocol::ToolOutcome,
    },
}

impl Acked {
    /// The ack frame for the UI.
    pub fn frame(&self, id: &str) -> Bytes {
        match *self {
            Acked::Question(outcome) => encode_fast::ack(id, outcome),
            Acked::Approval {
                reason,
                confirmed,
                outcome,
            } => encode_fast::approval_ack(id, reason, confirmed, outcome),
        }
    }
}

/// A local UI's answer to a remote question, to be sent to its origin.
#[derive(Debug, Clone)]
pub struct Forward {
    pub ui: PeerId,
    pub origin: Arc<str>,
    pub response: Answer,
    pub by: UiInfo,
}

/// What the federation task must do.
#[derive(Debug, Clone)]
pub enum FedOut {
    Publish(SharedQuestion),
    Ended(SharedEnd),
    Forward(Forward),
}

/// What one origin node's remote questions hold on this node.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoteLoad {
    pub count: usize,
    pub bytes: usize,
}

/// Why a remote question was not shown: it would exceed this node's limits, which bind each
/// origin node as they bind one local uid (`max_pending_per_uid`, `max_pending_bytes_per_uid`)
/// and every question together (`max_pending`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteRefusal {
    #[error("this node holds {held} pending requests, its limit (max_pending)")]
    Total { held: usize },
    #[error(
        "node {node} has {held} questions shown here, the per-node limit (max_pending_per_uid)"
    )]
    Count { node: Arc<str>, held: usize },
    #[error("node {node}'s questions would hold {bytes} bytes here, over the per-node limit of {limit} (max_pending_bytes_per_uid)")]
    Bytes {
        node: Arc<str>,
        bytes: usize,
        limit: usize,
    },
}

/// What another node asks: a question or an approval, validated as a local one would be.
#[derive(Debug)]
pub enum RemoteRequest {
    Question(ValidRequest),
    Approval(Box<ValidApproval>),
}

/// A question another node shares, read and validated off the broker's lock.
#[derive(Debug)]
pub struct RemoteQuestion {
    pub node: Arc<str>,
    pub request: RemoteRequest,
    pub producer: ProducerInfo,
    /// Time left before its origin's deadline.
    pub remaining: Duration,
}

impl Broker {
    /// Turns federation on (or changes its policy on reload). Remote questions already shown
    /// stay until they end.
    pub fn set_federation(&mut self, policy: Option<FedPolicy>) {
        let node = policy.as_ref().map(|f| f.node.clone());
        for p in self.peers.values_mut() {
            p.node = node.clone();
        }
        self.fed = policy;
    }

    pub fn federation(&self) -> Option<&FedPolicy> {
        self.fed.as_ref()
    }

    /// How many pending questions are remote, and how many local ones are shared.
    pub fn federated_counts(&self) -> (usize, usize) {
        let shared = self.pending.iter().filter(|(_, _, p)| p.shared).count();
        (self.remote_len, shared)
    }

    pub(super) fn remote_pending_of(&self, uid: u32) -> usize {
        match &self.fed {
            Some(f) if f.shown_as_uid == uid => self.remote_len,
            _ => 0,
        }
    }

    /// The `ask-user-request` a UI is sent: with `node` once federated.
    pub(super) fn ui_frame(&self, id: &str, req: &Pending, now: Instant) -> Bytes {
        let (node, now) = match (&req.origin, &self.fed) {
            // The UI is told the origin's time left, not the grace this node adds.
            (Some(origin), _) => (Some(&**origin), now + REMOTE_GRACE),
            (None, Some(f)) => (Some(&*f.node), now),
            (None, None) => return req.encode_for_ui(id, now),
        };
        if let Some(body) = &req.approval {
            let timeout_ms = req.deadline.saturating_duration_since(now).as_millis() as u64;
            let context = req.context.as_deref();
            return body
                .ui_frame_ref(id, timeout_ms, &req.producer_info, context, node)
                .encode();
        }
        UiRequestRef {
            correlation_id: id,
            questions: &req.questions,
            timeout_ms: req.deadline.saturating_duration_since(now).as_millis() as u64,
            producer: &req.producer_info,
            context: req.context.as_deref(),
            node,
        }
        .encode()
    }

    /// `ask-user-withdrawn`; once federated it names the question's node and, when a UI
    /// answered, which UI on which node.
    pub(super) fn withdrawn_frame(
        &self,
        id: &str,
        req: &Pending,
        reason: WithdrawReason,
        answered_by: Option<&UiInfo>,
    ) -> Bytes {
        let Some(f) = self.fed.as_ref() else {
            return req.encode_withdrawn(id, reason);
        };
        let node = req.origin.as_deref().unwrap_or(&f.node);
        let kind: &[u8] = match req.approval {
            Some(_) => br#"{"type":"tool-confirmation-withdrawn","correlationId":"#,
            None => br#"{"type":"ask-user-withdrawn","correlationId":"#,
        };
        encode_with(|out| {
            out.extend_from_slice(kind);
            json::write_str(out, id);
            out.extend_from_slice(br#","reason":""#);
            out.extend_from_slice(reason.as_str().as_bytes());
            out.extend_from_slice(br#"","node":"#);
            json::write_str(out, node);
            if let Some(by) = answered_by {
                out.extend_from_slice(br#","answeredBy":"#);
                serde_json::to_writer(&mut *out, by).expect("UiInfo serializes");
            }
            out.push(b'}');
        })
    }

    /// Marks a new local question shared (if the policy says so) and tells the federation task.
    pub(super) fn share(&self, id: &Arc<str>, req: &mut Pending, fx: &mut Effects) {
        let Some(f) = &self.fed else {
            return;
        };
        if !f.share_uids.contains(&req.producer_info.uid) {
            return;
        }
        req.shared = true;
        fx.federation.push(FedOut::Publish(SharedQuestion {
            id: id.clone(),
            questions: req.questions.clone(),
            producer: req.producer_info.clone(),
            context: req.context.clone(),
            timeout_ms: req.timeout_ms,
            remaining: Duration::from_millis(req.timeout_ms),
            approval: req.approval.clone(),
        }));
    }

    /// A shared question ended: every node withdraws it with this reason.
    pub(super) fn ended_shared(
        &self,
        id: &str,
        req: &Pending,
        reason: &'static str,
        answered_by: Option<&UiInfo>,
        fx: &mut Effects,
    ) {
        if req.shared && self.fed.is_some() {
            fx.federation.push(FedOut::Ended(SharedEnd {
                id: Arc::from(id),
                reason,
                answered_by: answered_by.cloned(),
                winner_peer: None,
            }));
        }
    }

    /// Every local question shared now, with the time it has left: republished on reconnect.
    pub fn shared_questions(&self, now: Instant) -> Vec<SharedQuestion> {
        self.pending
            .iter()
            .filter(|(_, _, req)| req.shared)
            .map(|(_, id, req)| SharedQuestion {
                id: id.clone(),
                questions: req.questions.clone(),
                producer: req.producer_info.clone(),
                context: req.context.clone(),
                timeout_ms: req.timeout_ms,
                remaining: req.deadline.saturating_duration_since(now),
                approval: req.approval.clone(),
            })
            .collect()
    }

    /// Whether `id` is a local question this node shares (for reconciling the bucket).
    pub fn is_shared(&self, id: &str) -> bool {
        self.pending.get(id).is_some_and(|p| p.shared)
    }

    /// The remote questions shown now, as (origin, id).
    pub fn remote_questions(&self) -> Vec<(Arc<str>, Arc<str>)> {
        self.pending
            .iter()
            .filter_map(|(_, id, req)| Some((req.origin.clone()?, id.clone())))
            .collect()
    }

    /// Another node's question: shown to the UIs that see `shown_as_uid`'s questions, live
    /// ones at once and catching-up ones through their replay. Returns false when it was not
    /// taken (federation off or not accepted from this node, or its id is pending already),
    /// and an error when it would exceed this node's limits. Its deadline is clamped to
    /// `max_timeout_ms`, as a local request's is.
    pub fn remote_ask(
        &mut self,
        q: RemoteQuestion,
        now: Instant,
        fx: &mut Effects,
    ) -> Result<bool, RemoteRefusal> {
        let Some(f) = &self.fed else {
            return Ok(false);
        };
        if !f.accept || (!f.accept_nodes.is_empty() && !f.accept_nodes.contains(&*q.node)) {
            return Ok(false);
        }
        let (id, questions, meta, context, approval) = match q.request {
            RemoteRequest::Question(r) => (r.correlation_id, r.questions, r.meta, r.context, None),
            RemoteRequest::Approval(a) => {
                let a = *a;
                (
                    a.correlation_id,
                    Box::from(""),
                    Vec::new(),
                    a.context,
                    Some(Box::new(a.body)),
                )
            }
        };
        if let Some(existing) = self.pending.get(id.as_str()) {
            // The same question again (a republish after a reconnect) is already shown; a
            // different node's question with a pending id cannot be told apart, so it is not.
            return Ok(existing.origin.as_deref() == Some(&*q.node));
        }
        let bytes = bytes_of(&id, &questions, approval.as_deref());
        let load = self.remote_load.get(&*q.node).copied().unwrap_or_default();
        if self.pending.len() >= self.limits.max_pending_total {
            return Err(RemoteRefusal::Total {
                held: self.pending.len(),
            });
        }
        if load.count >= self.limits.max_pending_per_uid {
            return Err(RemoteRefusal::Count {
                node: q.node,
                held: load.count,
            });
        }
        let limit = self.limits.max_pending_bytes_per_uid;
        if load.bytes.saturating_add(bytes) > limit {
            return Err(RemoteRefusal::Bytes {
                node: q.node,
                bytes: load.bytes.saturating_add(bytes),
                limit,
            });
        }
        let remaining = q
            .remaining
            .min(Duration::from_millis(self.limits.max_timeout_ms));
        let uid = f.shown_as_uid;
        let seq = self.pending.next_seq();
        let mut producer = q.producer;
        producer.uid = uid;
        let timeout_ms = remaining.as_millis() as u64;
        let pending = Pending {
            seq,
            producer: REMOTE,
            producer_info: producer,
            questions,
            meta,
            approval,
            accepted_at: now,
            deadline: now + remaining + REMOTE_GRACE,
            timeout_ms,
            context: context.map(Box::new),
            origin: Some(q.node.clone()),
            shared: false,
        };
        let id: Arc<str> = Arc::from(id);
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
            let shown = self.ui_frame(&id, &pending, now);
            for ui in live {
                fx.frame(ui, shown.clone());
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
        self.remote_len += 1;
        let load = self.remote_load.entry(q.node.clone()).or_default();
        load.count += 1;
        load.bytes += bytes;
        self.pending.insert(id, pending);
        Ok(true)
    }

    /// A remote question of `origin` left: its load goes with it.
    pub(super) fn remote_unload(&mut self, origin: &Arc<str>, id: &str, req: &Pending) {
        if let Some(load) = self.remote_load.get_mut(origin) {
            load.count -= 1;
            load.bytes =
                load.bytes
                    .saturating_sub(bytes_of(id, &req.questions, req.approval.as_deref()));
            if load.count == 0 {
                self.remote_load.remove(origin);
            }
        }
    }

    /// A remote question ended on its origin: withdrawn here with the same reason, except
    /// from the local UI whose answer won (`winner`), which learns it from its ack.
    #[allow(clippy::too_many_arguments)]
    pub fn remote_end(
        &mut self,
        origin: &str,
        id: &str,
        reason: WithdrawReason,
        answered_by: Option<UiInfo>,
        winner: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) {
        let ours = self
            .pending
            .get(id)
            .is_some_and(|p| p.origin.as_deref() == Some(origin));
        if !ours {
            return;
        }
        let req = self.take(id, reason, winner, answered_by.as_ref(), fx);
        if !self.watchers.is_empty() {
            let latency = (now - req.accepted_at).as_millis() as u64;
            let end = match reason {
                WithdrawReason::Answered => End::Answered,
                WithdrawReason::Timeout => End::Timeout,
                WithdrawReason::Withdrawn => End::Withdrawn,
                WithdrawReason::ProducerGone => End::ProducerGone,
                WithdrawReason::Shutdown => End::Shutdown,
            };
            fx.events.push(effects::event(
                BusEventKind::End(end),
                id,
                &req,
                answered_by,
                Some(latency),
                None,
                None,
            ));
        }
    }

    /// A node is gone: its questions are withdrawn `producer-gone`.
    pub fn node_gone(&mut self, node: &str, now: Instant, fx: &mut Effects) {
        let ids: Vec<Arc<str>> = self
            .pending
            .iter()
            .filter(|(_, _, req)| req.origin.as_deref() == Some(node))
            .map(|(_, id, _)| id.clone())
            .collect();
        for id in ids {
            self.remote_end(node, &id, WithdrawReason::ProducerGone, None, None, now, fx);
        }
    }

    /// A local UI answered a remote question (already checked like a local answer): the
    /// federation task sends it to the origin, and `forwarded` tells the UI what it decided.
    pub(super) fn forward(
        &mut self,
        ui: PeerId,
        origin: Arc<str>,
        response: Answer,
        by: UiInfo,
        fx: &mut Effects,
    ) {
        fx.federation.push(FedOut::Forward(Forward {
            ui,
            origin,
            response,
            by,
        }));
    }

    /// The origin's decision on an answer a local UI forwarded (or why it never got there).
    pub fn forwarded(
        &mut self,
        ui: PeerId,
        id: &str,
        decision: Result<Acked, FrameError>,
        fx: &mut Effects,
    ) {
        if !self.peers.contains_key(&ui) {
            return;
        }
        match decision {
            Ok(acked) => fx.frame(ui, acked.frame(id)),
            Err(err) => fx.error(ui, err),
        }
    }

    /// A UI on node `by.node` answered a question asked here, through NATS: decided exactly
    /// as a local UI's answer (first valid answer wins), except that the ack is the return
    /// value, sent back as the reply.
    pub fn respond_remote(
        &mut self,
        answer: Answer,
        by: UiInfo,
        by_peer: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) -> Result<Acked, FrameError> {
        let id = answer.correlation_id().to_owned();
        let Some(req) = self.pending.get(id.as_str()).filter(|r| r.shared) else {
            // Not pending, or not one this node shares: nothing about it leaks.
            return Err(BrokerError::NotPending(id.clone()).into_frame_error(&id));
        };
        let resp = match (answer, &req.approval) {
            (Answer::Question(resp), None) => resp,
            (Answer::Approval(resp), Some(body)) => {
                self.offered(&id, body, &resp)?;
                let acked = self.decided(&id, resp, by, None, now, fx);
                self.mark_winner(&id, by_peer, fx);
                return Ok(acked);
            }
            (Answer::Question(_), Some(_)) => {
                let kind = crate::protocol::RequestKind::Approval;
                return Err(BrokerError::WrongKind {
                    id: id.clone(),
                    kind,
                }
                .into_frame_error(&id));
            }
            (Answer::Approval(_), None) => {
                let kind = crate::protocol::RequestKind::Question;
                return Err(BrokerError::WrongKind {
                    id: id.clone(),
                    kind,
                }
                .into_frame_error(&id));
            }
        };
        let count = req.meta.len();
        if !resp.cancelled {
            if let Some((&index, _)) = resp.answers.iter().find(|(&i, _)| i >= count) {
                let err = BrokerError::AnswerOutOfRange { index, count };
                return Err(err.into_frame_error(&id));
            }
            let size = questions::answered_result_size_bound(&req.meta, &resp.answers);
            if size > MAX_RESULT_BYTES {
                let err = BrokerError::ResultTooLarge {
                    size,
                    limit: MAX_RESULT_BYTES,
                };
                return Err(err.into_frame_error(&id));
            }
        }
        let req = self.take(&id, WithdrawReason::Answered, None, Some(&by), fx);
        let ending = if resp.cancelled {
            Ending {
                outcome: Outcome::Dismissed,
                result: questions::dismissed_result(&req.meta),
                answers: BTreeMap::new(),
                ui: Some(by),
            }
        } else {
            Ending {
                outcome: Outcome::Answered,
                result: questions::answered_result(&req.meta, &resp.answers),
                answers: resp.answers,
                ui: Some(by),
            }
        };
        let outcome = ending.outcome;
        self.stats.record_latency(now - req.accepted_at);
        self.finish(&id, req, ending, now, fx);
        self.mark_winner(&id, by_peer, fx);
        Ok(Acked::Question(outcome))
    }

    /// The end just queued for `id` names the winning UI's connection on its node.
    fn mark_winner(&self, id: &str, by_peer: Option<PeerId>, fx: &mut Effects) {
        for out in fx.federation.iter_mut().rev() {
            if let FedOut::Ended(end) = out {
                if *end.id == *id {
                    end.winner_peer = by_peer;
                    break;
                }
            }
        }
    }
}
