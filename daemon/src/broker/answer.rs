//! A UI's answer: `respond` for a question, `decide` for an approval. Both pass the same
//! checks in the same order (`answerable`: subscribed, a UI, pending, visible to it, shown by
//! its filter, the right kind) before the first valid answer wins and ends the request.

use tokio::time::Instant;

use super::body::{Body, Told};
use super::end::{self, Ended};
use super::peers::Peer;
use super::pending::Pending;
use super::{remote, Broker, BrokerError, Effects, PeerId, MAX_RESULT_BYTES};
use crate::approvals::{self, ApprovalBody};
use crate::protocol::{
    encode_fast, ApprovalResponse, AskUserResponse, Decision, End, FrameError, Outcome,
    RequestKind, ToolConfirmationResponse, ToolOutcome, UiInfo, WithdrawReason,
};
use crate::questions::{self, QuestionMeta};

impl Broker {
    /// A UI answers (or dismisses). The first valid answer wins; every other UI that has the
    /// question is told it was answered; the winner gets an acknowledgement.
    pub fn respond(&mut self, peer: PeerId, resp: AskUserResponse, now: Instant, fx: &mut Effects) {
        let id = resp.correlation_id.as_str();
        let (ui, req) = match self.answerable(peer, id, RequestKind::Question) {
            Ok(found) => found,
            Err(err) => return fx.error(peer, err),
        };
        if let Err(err) = check_answers(id, req.body.meta(), &resp) {
            return fx.error(peer, err);
        }
        let answered_by = self.answered_by(ui);
        if let Some(origin) = req.origin.remote_node().cloned() {
            // The origin decides; this UI learns the outcome from its reply.
            let answer = remote::Answer::Question(resp);
            return self.forward(peer, origin, answer, answered_by, fx);
        }
        self.answered(resp, answered_by, Some(peer), now, fx);
    }

    /// A UI decides an approval (or dismisses it): as `respond`, with the outcome checked
    /// against those the approval offers.
    pub fn decide(
        &mut self,
        peer: PeerId,
        resp: ToolConfirmationResponse,
        now: Instant,
        fx: &mut Effects,
    ) {
        let id = resp.correlation_id.as_str();
        let (ui, req) = match self.answerable(peer, id, RequestKind::Approval) {
            Ok(found) => found,
            Err(err) => return fx.error(peer, err),
        };
        let Body::Approval(body) = &req.body else {
            unreachable!("answerable checked the kind");
        };
        if let Err(err) = self.offered(id, body, &resp) {
            return fx.error(peer, err);
        }
        let answered_by = self.answered_by(ui);
        if let Some(origin) = req.origin.remote_node().cloned() {
            // The origin decides; this UI learns the outcome from its reply. Until then the
            // approval stays pending: a decision that never arrives approves nothing.
            let answer = remote::Answer::Approval(resp);
            return self.forward(peer, origin, answer, answered_by, fx);
        }
        let id = id.to_owned();
        let acked = self.decided(&id, resp, answered_by, Some(peer), now, fx);
        fx.frame(peer, acked.frame(&id));
    }

    /// The checks every answer passes, in this order: the peer is a subscribed UI that may
    /// answer, the request is pending, visible to it, shown by its filter, and of `kind`.
    fn answerable(
        &self,
        peer: PeerId,
        id: &str,
        kind: RequestKind,
    ) -> Result<(&Peer, &Pending), FrameError> {
        let Some(ui) = self.peers.get(&peer).filter(|p| p.ui.is_some()) else {
            return Err(BrokerError::NotSubscribed.into_frame_error(id));
        };
        if !ui.info.rights.ui {
            return Err(BrokerError::NotAUi(ui.info.uid).into_frame_error(id));
        }
        let Some(req) = self.pending.get(id) else {
            return Err(BrokerError::NotPending(id.to_owned()).into_frame_error(id));
        };
        if !ui.info.sees(req.producer_info.uid) {
            return Err(BrokerError::ForeignQuestion(id.to_owned()).into_frame_error(id));
        }
        if !ui.shown(req) {
            return Err(BrokerError::OutsideFilter(id.to_owned()).into_frame_error(id));
        }
        if req.body.kind() != kind {
            let err = BrokerError::WrongKind {
                id: id.to_owned(),
                kind: req.body.kind(),
            };
            return Err(err.into_frame_error(id));
        }
        Ok((ui, req))
    }

    /// Who answered, as the producer and the other UIs are told.
    fn answered_by(&self, ui: &Peer) -> UiInfo {
        UiInfo {
            client: ui.info.client.clone(),
            pid: ui.info.pid,
            node: self.fed.as_ref().map(|f| f.node.to_string()),
        }
    }

    /// Refuses a decision whose outcome the approval does not offer.
    pub(super) fn offered(
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

    /// Ends a pending question with a UI's checked answer (`winner`: the local UI that gave
    /// it, left out of the withdrawal and acked before the producer is told); returns the
    /// id and the outcome.
    pub(super) fn answered(
        &mut self,
        resp: AskUserResponse,
        answered_by: UiInfo,
        winner: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) -> (String, Outcome) {
        let id = resp.correlation_id;
        let user = resp.user;
        let req = self.take(
            &id,
            WithdrawReason::Answered,
            winner,
            Some(&answered_by),
            fx,
        );
        let answers = (!resp.cancelled).then_some(resp.answers);
        let told = end::answered(&id, req.body.meta(), answers);
        let Told::Question(r) = &told else {
            unreachable!("a question's producer is told a question's response");
        };
        let outcome = r.reason;
        if let Some(winner) = winner {
            fx.frame(winner, encode_fast::ack(&id, outcome));
        }
        self.stats.record_latency(now - req.accepted_at);
        let decider = winner.and_then(|w| self.decider_of(w, user));
        let ended = Ended::by_ui(End::from(outcome), answered_by, told, decider);
        self.end(&id, req, ended, now, fx);
        (id, outcome)
    }

    /// Ends a pending approval with a UI's checked decision (`winner`: the local UI that
    /// made it, left out of the withdrawal); returns the ack that UI is owed.
    pub(super) fn decided(
        &mut self,
        id: &str,
        resp: ToolConfirmationResponse,
        answered_by: UiInfo,
        winner: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) -> remote::Acked {
        let req = self.take(id, WithdrawReason::Answered, winner, Some(&answered_by), fx);
        let user = resp.user;
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
        let told = Told::Approval(ApprovalResponse {
            correlation_id: id.to_owned(),
            confirmed,
            outcome,
            reason,
            message,
            payload,
        });
        let decider = winner.and_then(|w| self.decider_of(w, user));
        let ended = Ended::by_ui(End::from(reason), answered_by, told, decider);
        self.end(id, req, ended, now, fx);
        remote::Acked::Approval {
            reason,
            confirmed,
            outcome,
        }
    }
}

/// Refuses a question's answer that names a question it does not have, or whose result would
/// be too large to send (a dismissal carries no answers to check).
pub(super) fn check_answers(
    id: &str,
    meta: &[QuestionMeta],
    resp: &AskUserResponse,
) -> Result<(), FrameError> {
    if resp.cancelled {
        return Ok(());
    }
    let count = meta.len();
    if let Some((&index, _)) = resp.answers.iter().find(|(&i, _)| i >= count) {
        let err = BrokerError::AnswerOutOfRange { index, count };
        return Err(err.into_frame_error(id));
    }
    let size = questions::answered_result_size_bound(meta, &resp.answers);
    if size > MAX_RESULT_BYTES {
        let err = BrokerError::ResultTooLarge {
            size,
            limit: MAX_RESULT_BYTES,
        };
        return Err(err.into_frame_error(id));
    }
    Ok(())
}
