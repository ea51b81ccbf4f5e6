//! A UI's answer, to a question or an approval: one road for both. Every answer passes the
//! same checks in the same order (`answerable`: subscribed, a UI, pending, visible to it,
//! shown by its filter; then `acceptable`: the right kind, and what that kind requires), then
//! the first valid answer wins and ends the request (`answered`), wherever its UI is.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::body::{Body, Told};
use super::effects::{Acked, Answer};
use super::end::Ended;
use super::peers::Peer;
use super::pending::Pending;
use super::{Broker, BrokerError, Effects, PeerId, MAX_RESULT_BYTES};
use crate::approvals::{self, ApprovalBody};
use crate::protocol::{
    ApprovalResponse, AskUserResponse, Decision, End, FrameError, Outcome, ProducerResponse,
    ToolConfirmationResponse, ToolOutcome, UiInfo, WithdrawReason,
};
use crate::questions::{self, QuestionMeta};

impl Broker {
    /// A UI answers a question (or dismisses it): see [`Broker::answer`].
    pub fn respond(&mut self, peer: PeerId, resp: AskUserResponse, now: Instant, fx: &mut Effects) {
        self.answer(peer, Answer::Question(resp), now, fx);
    }

    /// A UI decides an approval (or dismisses it): see [`Broker::answer`].
    pub fn decide(
        &mut self,
        peer: PeerId,
        resp: ToolConfirmationResponse,
        now: Instant,
        fx: &mut Effects,
    ) {
        self.answer(peer, Answer::Approval(resp), now, fx);
    }

    /// A local UI answers (or dismisses) a request. The first valid answer wins; every other
    /// UI that has the request is told it was answered; the winner gets an acknowledgement.
    /// A remote request's answer goes to its origin, which decides: until then it stays
    /// pending (a decision that never arrives approves nothing).
    pub fn answer(&mut self, peer: PeerId, answer: Answer, now: Instant, fx: &mut Effects) {
        let id = answer.correlation_id().to_owned();
        let (ui, req) = match self.answerable(peer, &id) {
            Ok(found) => found,
            Err(err) => return fx.error(peer, err),
        };
        if let Err(err) = acceptable(&id, &req.body, &answer) {
            return fx.error(peer, err);
        }
        let answered_by = self.answered_by(ui);
        if let Some(origin) = req.origin.remote_node().cloned() {
            // The origin decides; this UI learns the outcome from its reply.
            return self.forward(peer, origin, answer, answered_by, fx);
        }
        self.answered(&id, answer, answered_by, Some(peer), now, fx);
    }

    /// The checks every local answer passes first, in this order: the peer is a subscribed
    /// UI that may answer, and the request is pending, visible to it and shown by its filter.
    fn answerable(&self, peer: PeerId, id: &str) -> Result<(&Peer, &Pending), FrameError> {
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

    /// Ends a pending request with a UI's checked answer (`winner`: the local UI that gave
    /// it, left out of the withdrawal and acked before the producer is told); returns the
    /// ack, which a remote UI is sent as its reply.
    pub(super) fn answered(
        &mut self,
        id: &str,
        answer: Answer,
        answered_by: UiInfo,
        winner: Option<PeerId>,
        now: Instant,
        fx: &mut Effects,
    ) -> Acked {
        let req = self.take(id, WithdrawReason::Answered, winner, Some(&answered_by), fx);
        let latency = now - req.accepted_at;
        self.stats.record_latency(latency);
        let (told, acked, user) = match answer {
            Answer::Question(resp) => {
                let answers = (!resp.cancelled).then_some(resp.answers);
                let told = question_told(id, req.body.meta(), answers);
                let acked = Acked::Question(told.reason);
                (Told::Question(told), acked, resp.user)
            }
            Answer::Approval(resp) => {
                self.stats.approvals.record_latency(latency);
                let (told, acked) = approval_told(id, req.timeout_ms, resp.decision);
                (Told::Approval(told), acked, resp.user)
            }
        };
        if let Some(winner) = winner {
            fx.frame(winner, acked.frame(id));
        }
        let decider = winner.and_then(|w| self.decider_of(w, user));
        let ended = Ended::by_ui(End::from(acked.reason()), answered_by, told, decider);
        self.end(id, req, ended, now, fx);
        acked
    }
}

/// Refuses an answer of the wrong kind for `body`, or one the request cannot take: answers to
/// questions it does not have (or too large a result), an outcome the approval does not offer.
pub(super) fn acceptable(id: &str, body: &Body, answer: &Answer) -> Result<(), FrameError> {
    match (answer, body) {
        (Answer::Question(resp), Body::Questions(n)) => check_answers(id, &n.meta, resp),
        (Answer::Approval(resp), Body::Approval(a)) => offered(id, a, resp),
        (_, body) => {
            let kind = body.kind();
            let err = BrokerError::WrongKind {
                id: id.to_owned(),
                kind,
            };
            Err(err.into_frame_error(id))
        }
    }
}

/// Refuses a decision whose outcome the approval does not offer.
fn offered(
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

/// What a question's producer is told when a UI answered (`answers`) or dismissed it
/// (`None`).
fn question_told(
    id: &str,
    meta: &[QuestionMeta],
    answers: Option<BTreeMap<usize, String>>,
) -> ProducerResponse {
    let (reason, result, answers) = match answers {
        Some(answers) => (
            Outcome::Answered,
            questions::answered_result(meta, &answers),
            answers,
        ),
        None => (
            Outcome::Dismissed,
            questions::dismissed_result(meta),
            BTreeMap::new(),
        ),
    };
    ProducerResponse {
        correlation_id: id.to_owned(),
        cancelled: reason != Outcome::Answered,
        answers,
        reason,
        result,
    }
}

/// What an approval's producer is told when a UI decided it (or dismissed it), and the ack
/// that UI is owed.
fn approval_told(id: &str, timeout_ms: u64, decision: Decision) -> (ApprovalResponse, Acked) {
    let (reason, outcome, message, payload) = match decision {
        Decision::Dismissed => {
            let message = approvals::daemon_message(Outcome::Dismissed, timeout_ms);
            (Outcome::Dismissed, ToolOutcome::Cancel, message, None)
        }
        Decision::Decided {
            outcome,
            message,
            payload,
        } => (Outcome::Answered, outcome, message, payload),
    };
    let confirmed = reason == Outcome::Answered && outcome.confirms();
    let told = ApprovalResponse {
        correlation_id: id.to_owned(),
        confirmed,
        outcome,
        reason,
        message,
        payload,
    };
    let acked = Acked::Approval {
        reason,
        confirmed,
        outcome,
    };
    (told, acked)
}

/// Refuses a question's answer that names a question it does not have, or whose result would
/// be too large to send (a dismissal carries no answers to check).
fn check_answers(
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
