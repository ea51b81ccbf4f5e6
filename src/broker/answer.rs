//! A UI's answer: `respond` for a question, `decide` for an approval. Both check the same
//! things in the same order (subscribed, a UI, pending, visible to it, shown by its filter,
//! the right kind) before the first valid answer wins and ends the request.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::end::Ending;
use super::{remote, Broker, BrokerError, Effects, PeerId, MAX_RESULT_BYTES};
use crate::approvals::{self, ApprovalBody};
use crate::protocol::{
    encode_fast, ApprovalResponse, AskUserResponse, Decision, FrameError, Outcome, RequestKind,
    ToolConfirmationResponse, ToolOutcome, UiInfo, WithdrawReason,
};
use crate::questions;

impl Broker {
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
}
