//! The end of a pending request, the broker's invariant: every accepted request leaves the
//! pending table through `take` and gets exactly one terminal frame through `end`, where it is
//! counted and logged once. Timeouts and shutdown are
//! here, since they end requests nobody answered.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::body::{Body, Told};
use super::durable::{DecidedBy, Decider};
use super::pending::Pending;
use super::{effects, Broker, Effects, PeerId};
use crate::approvals;
use crate::protocol::{
    ApprovalResponse, BusEventKind, End, Outcome, ProducerResponse, RequestKind, ToolOutcome,
    UiInfo, WithdrawReason,
};
use crate::questions::{self, DaemonOutcome};

impl Broker {
    /// Times out every request whose deadline is at or before `now`, and ends the producers'
    /// graces that are over (with a store).
    pub fn expire(&mut self, now: Instant, fx: &mut Effects) {
        self.expire_graces(now, fx);
        while let Some(id) = self.pending.first_due(now) {
            // A remote one's end never came from its origin (it is due a grace after the
            // origin's deadline).
            self.lapse(&id, DaemonOutcome::Timeout, now, fx);
        }
    }

    /// When the next request times out, if any is pending.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.pending.next_deadline(), self.next_grace()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every pending producer gets `shutdown`, every UI `ask-user-withdrawn` `shutdown`.
    pub fn shutdown(&mut self, now: Instant, fx: &mut Effects) {
        self.closed = true;
        for id in self.pending.ids() {
            self.lapse(&id, DaemonOutcome::Shutdown, now, fx);
        }
    }

    /// Ends a request by this node's own doing (`Timeout` or `Shutdown`): withdrawn from the
    /// UIs, and ended for its producer when it was asked here (a remote request's origin ends
    /// it there, and this node only withdraws it).
    fn lapse(&mut self, id: &str, why: DaemonOutcome, now: Instant, fx: &mut Effects) {
        let reason = match why {
            DaemonOutcome::Shutdown => WithdrawReason::Shutdown,
            _ => WithdrawReason::Timeout,
        };
        let req = self.take(id, reason, None, None, fx);
        if req.origin.is_remote() {
            return;
        }
        let ended = Ended::unanswered(id, &req, why);
        self.end(id, req, ended, now, fx);
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
        if req.origin.is_shared() {
            self.shared_len -= 1;
        }
        if let Some(origin) = req.origin.remote_node().cloned() {
            self.remote_len -= 1;
            self.remote_unload(&origin, id, &req);
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

    /// A request's one end (it was just `take`n): counted, told to the watchers, telemetry
    /// and the other nodes, and `told` sent to its producer when it is here.
    pub(super) fn end(
        &mut self,
        id: &str,
        req: Pending,
        ended: Ended,
        now: Instant,
        fx: &mut Effects,
    ) {
        self.ended_durably(id, &req, &ended, fx, now);
        let decided_by = (!self.watchers.is_empty()).then(|| Box::new(ended.decided_by(&req)));
        // The telemetry line names its decider only where `reason` and `ui` cannot: answered
        // elsewhere, or by a policy rule. The same object, from the same function.
        // Answered elsewhere keeps the line's promised `{kind, via}` (the producer's claim).
        let recorded = ended
            .decider
            .as_ref()
            .filter(|d| d.elsewhere || d.rule.is_some())
            .map(|d| {
                let full = decided_by
                    .clone()
                    .unwrap_or_else(|| Box::new(ended.decided_by(&req)));
                if d.rule.is_some() {
                    return full;
                }
                Box::new(DecidedBy {
                    via: full.via,
                    ..DecidedBy::of_end(End::Answered)
                })
            });
        let Ended {
            end,
            by: ui,
            told,
            decider: _,
        } = ended;
        self.stats.count(end);
        if req.body.kind() == RequestKind::Approval {
            let decision = told
                .as_ref()
                .and_then(Told::approval)
                .filter(|r| r.reason == Outcome::Answered)
                .map(|r| r.outcome);
            self.stats.approvals.count_decided(end, decision);
        }
        self.ended_shared(id, &req, end, ui.as_ref(), fx);
        let latency = (now - req.accepted_at).as_millis() as u64;
        let answers = match &told {
            Some(Told::Question(r)) if r.reason == Outcome::Answered => Some(r.answers.len()),
            _ => None,
        };
        let facts = effects::Facts::of(id, &req, told.as_ref());
        if !self.watchers.is_empty() {
            let kind = BusEventKind::End(end);
            let mut event = effects::event(&facts, kind, None, ui.clone(), Some(latency), None);
            event.decided_by = decided_by;
            fx.events.push(event);
        }
        let mut record = effects::record(&facts, end, None, ui, latency, answers);
        record.decided_by = recorded;
        fx.records.push(record);
        if let (Some(told), Some(producer)) = (told, req.origin.producer()) {
            fx.frame(producer, told.encode());
        }
    }
}

/// How a request ended.
pub(super) struct Ended {
    pub(super) end: End,
    /// The UI whose answer or dismissal ended it.
    pub(super) by: Option<UiInfo>,
    /// What its producer is told; `None` when there is no one to tell (it is gone).
    pub(super) told: Option<Told>,
    /// The local UI that decided it, for the record's `decidedBy`.
    pub(super) decider: Option<Decider>,
}

impl Ended {
    pub(super) fn by_ui(end: End, ui: UiInfo, told: Told, decider: Option<Decider>) -> Ended {
        Ended {
            end,
            by: Some(ui),
            told: Some(told),
            decider,
        }
    }

    /// A request nobody answered (timeout, no-ui, withdrawn, shutdown): for an approval
    /// never a confirmation, and its producer is told why.
    pub(super) fn unanswered(id: &str, req: &Pending, outcome: DaemonOutcome) -> Ended {
        Ended {
            end: End::from(outcome_of(outcome)),
            by: None,
            told: Some(unanswered(id, req, outcome)),
            decider: None,
        }
    }

    /// Who or what decided it: the one `decidedBy` its history record and the watchers' end
    /// event both carry.
    pub(super) fn decided_by(&self, req: &Pending) -> DecidedBy {
        let mut decided_by = DecidedBy::of_end(self.end);
        if let Some(rule) = self.decider.as_ref().and_then(|d| d.rule.clone()) {
            decided_by.kind = "rule".into();
            decided_by.rule = Some(rule);
            return decided_by;
        }
        if let Some(ui) = &self.by {
            decided_by.client.clone_from(&ui.client);
            decided_by.node.clone_from(&ui.node);
        }
        if let Some(who) = &self.decider {
            if who.elsewhere {
                // The producer's word, under the producer's name.
                decided_by.kind = "human".into();
                decided_by.client.clone_from(&req.producer_info.client);
            }
            decided_by.uid = who.uid;
            decided_by.via = Some(who.via.clone().unwrap_or_else(|| "client".into()));
            decided_by.user.clone_from(&who.user);
        } else if self.by.is_some() {
            decided_by.via = Some("federation".into());
        }
        decided_by
    }

    pub(super) fn untold(end: End) -> Ended {
        Ended {
            end,
            by: None,
            told: None,
            decider: None,
        }
    }
}

/// What the producer of a request nobody answered is told.
fn unanswered(id: &str, req: &Pending, outcome: DaemonOutcome) -> Told {
    let reason = outcome_of(outcome);
    match &req.body {
        Body::Questions(n) => Told::Question(ProducerResponse {
            correlation_id: id.to_owned(),
            answers: BTreeMap::new(),
            cancelled: true,
            reason,
            result: questions::daemon_result(&n.meta, outcome, req.timeout_ms),
        }),
        Body::Approval(_) => Told::Approval(ApprovalResponse {
            correlation_id: id.to_owned(),
            confirmed: false,
            outcome: ToolOutcome::Cancel,
            reason,
            message: approvals::daemon_message(reason, req.timeout_ms),
            payload: None,
        }),
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
