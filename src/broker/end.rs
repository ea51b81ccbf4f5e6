//! The end of a pending request, the broker's invariant: every accepted request leaves the
//! pending table through `take` and gets exactly one terminal frame through `finish` or
//! `finish_approval`, counted and logged once in `count_end`. Timeouts and shutdown are
//! here, since they end requests nobody answered.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::pending::Pending;
use super::{effects, Broker, Effects, PeerId};
use crate::approvals;
use crate::protocol::{
    encode_fast, ApprovalResponse, BusEventKind, End, Outcome, ProducerResponse, ToolOutcome,
    UiInfo, WithdrawReason,
};
use crate::questions::{self, DaemonOutcome, ToolResult};

impl Broker {
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
    pub(super) fn take(
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
        if let Some(origin) = &req.origin {
            self.remote_len -= 1;
            self.remote_unload(origin, id, &req);
        }
        self.withdraw(id, &req, reason, except, answered_by, fx);
        req
    }

    /// Tells every UI that was sent request `seq` (except `except`) that it is gone. One that
    /// may not see it was never sent it (`sees` only changes through `set_rights`, which
    /// sends or withdraws what changed).
    pub(super) fn withdraw(
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
    pub(super) fn finish(
        &mut self,
        id: &str,
        req: Pending,
        ending: Ending,
        now: Instant,
        fx: &mut Effects,
    ) {
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
    pub(super) fn count_end(
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

    /// Ends a request nobody answered (timeout, no-ui, withdrawn, shutdown): for an approval
    /// never a confirmation, and its producer is told why.
    pub(super) fn end_unanswered(
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
    pub(super) fn finish_approval(
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
        fx.frame(req.producer, encode_fast::approval_response(&response));
    }
}

/// How a pending request ends, with what its producer is told.
pub(super) struct Ending {
    pub(super) outcome: Outcome,
    pub(super) result: ToolResult,
    /// An answered request's answers (empty for every other outcome).
    pub(super) answers: BTreeMap<usize, String>,
    /// The UI whose answer or dismissal ended it.
    pub(super) ui: Option<UiInfo>,
}

impl Ending {
    /// One of the daemon's own outcomes, which no UI chose.
    pub(super) fn daemon(req: &Pending, outcome: DaemonOutcome) -> Ending {
        Ending {
            outcome: Ending::outcome_of(outcome),
            result: questions::daemon_result(&req.meta, outcome, req.timeout_ms),
            answers: BTreeMap::new(),
            ui: None,
        }
    }

    pub(super) fn outcome_of(outcome: DaemonOutcome) -> Outcome {
        match outcome {
            DaemonOutcome::Timeout => Outcome::Timeout,
            DaemonOutcome::NoUi => Outcome::NoUi,
            DaemonOutcome::Withdrawn => Outcome::Withdrawn,
            DaemonOutcome::Shutdown => Outcome::Shutdown,
        }
    }
}
