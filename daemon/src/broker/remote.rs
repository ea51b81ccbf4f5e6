//! The broker's side of federation: which local questions are shared, remote questions as
//! one more kind of pending request (asked by a peer that is another node), answers to them
//! forwarded to their origin, and answers from other nodes' UIs to questions asked here. Pure
//! state like the rest of the broker: what must cross NATS is appended to
//! `Effects::federation` for the federation task, which never runs under the broker's lock.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::time::{Duration, Instant};

use super::answer::acceptable;
use super::body::Origin;
use super::effects::{self, Acked, Answer, FedOut, Forward, SharedEnd, SharedQuestion};
use super::pending::{bytes_of, Pending};
use super::{Broker, BrokerError, Effects, PeerId, Valid};
use crate::protocol::{BusEventKind, End, FrameError, ProducerInfo, UiInfo, WithdrawReason};

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

/// A question another node shares, read and validated off the broker's lock.
#[derive(Debug)]
pub struct RemoteQuestion {
    pub node: Arc<str>,
    /// A question or an approval, validated as a local one would be.
    pub request: Valid,
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
        debug_assert_eq!(
            self.shared_len,
            self.pending
                .iter()
                .filter(|(_, _, p)| p.origin.is_shared())
                .count()
        );
        (self.remote_len, self.shared_len)
    }

    pub(super) fn remote_pending_of(&self, uid: u32) -> usize {
        match &self.fed {
            Some(f) if f.shown_as_uid == uid => self.remote_len,
            _ => 0,
        }
    }

    /// Marks a new local question shared (if the policy says so) and tells the federation task.
    pub(super) fn share(&self, id: &Arc<str>, req: &mut Pending, fx: &mut Effects) {
        let Some(f) = &self.fed else {
            return;
        };
        if !f.share_uids.contains(&req.producer_info.uid) {
            return;
        }
        let Origin::Local { shared, .. } = &mut req.origin else {
            return;
        };
        *shared = true;
        let remaining = Duration::from_millis(req.timeout_ms);
        let q = SharedQuestion::of(id.clone(), req, remaining);
        fx.federation.push(FedOut::Publish(q));
    }

    /// A shared question ended: every node withdraws it with this reason.
    pub(super) fn ended_shared(
        &self,
        id: &str,
        req: &Pending,
        reason: End,
        answered_by: Option<&UiInfo>,
        fx: &mut Effects,
    ) {
        if req.origin.is_shared() && self.fed.is_some() {
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
            .filter(|(_, _, req)| req.origin.is_shared())
            .map(|(_, id, req)| {
                let remaining = req.deadline.saturating_duration_since(now);
                SharedQuestion::of(id.clone(), req, remaining)
            })
            .collect()
    }

    /// The remote questions shown now, as (origin, id).
    pub fn remote_questions(&self) -> Vec<(Arc<str>, Arc<str>)> {
        self.pending
            .iter()
            .filter_map(|(_, id, req)| Some((req.origin.remote_node()?.clone(), id.clone())))
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
        let Valid {
            correlation_id: id,
            context,
            body,
            ..
        } = q.request;
        if let Some(existing) = self.pending.get(id.as_str()) {
            // The same question again (a republish after a reconnect) is already shown; a
            // different node's question with a pending id cannot be told apart, so it is not.
            return Ok(existing.origin.remote_node() == Some(&q.node));
        }
        let bytes = bytes_of(&id, &body);
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
        let mut producer = q.producer;
        producer.uid = f.shown_as_uid;
        let load = self.remote_load.entry(q.node.clone()).or_default();
        load.count += 1;
        load.bytes += bytes;
        let pending = Pending {
            seq: self.pending.next_seq(),
            origin: Origin::Remote { node: q.node },
            producer_info: producer,
            context: context.map(Box::new),
            body,
            accepted_at: now,
            deadline: now + remaining + REMOTE_GRACE,
            timeout_ms: remaining.as_millis() as u64,
        };
        self.announce(Arc::from(id), pending, now, fx);
        Ok(true)
    }

    /// A remote question of `origin` left: its load goes with it.
    pub(super) fn remote_unload(&mut self, origin: &Arc<str>, id: &str, req: &Pending) {
        if let Some(load) = self.remote_load.get_mut(origin) {
            load.count -= 1;
            load.bytes = load.bytes.saturating_sub(bytes_of(id, &req.body));
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
            .and_then(|p| p.origin.remote_node())
            .is_some_and(|node| **node == *origin);
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
            let facts = effects::Facts::of(id, &req, None);
            let kind = BusEventKind::End(end);
            let event = effects::event(&facts, kind, None, answered_by, Some(latency), None);
            fx.events.push(event);
        }
    }

    /// A node is gone: its questions are withdrawn `producer-gone`.
    pub fn node_gone(&mut self, node: &str, now: Instant, fx: &mut Effects) {
        let ids: Vec<Arc<str>> = self
            .pending
            .iter()
            .filter(|(_, _, req)| req.origin.remote_node().is_some_and(|n| **n == *node))
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
        let Some(req) = self
            .pending
            .get(id.as_str())
            .filter(|r| r.origin.is_shared())
        else {
            // Not pending, or not one this node shares: nothing about it leaks.
            return Err(BrokerError::NotPending(id.clone()).into_frame_error(&id));
        };
        acceptable(&id, &req.body, &answer)?;
        let acked = self.answered(&id, answer, by, None, now, fx);
        self.mark_winner(&id, by_peer, fx);
        Ok(acked)
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
