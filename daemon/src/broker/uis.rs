//! The answering side's view: which UIs and watchers there are, and what each is shown.
//! Subscribing (with its filter), replay of pending requests to a UI catching up, watching,
//! and re-applying access rights after a reload all decide here who sees which request, and
//! with what frame: a request as a UI is shown it and the frame that takes it off the screen.

use bytes::Bytes;

use super::peers::Cursor;
use super::pending::Pending;
use super::remote::REMOTE_GRACE;
use super::{Broker, BrokerError, Effects, PeerId, Rights};
use crate::protocol::{
    encode, encode_fast, FrameError, ServerFrame, SubscribeFilter, UiInfo, WithdrawReason,
};
use tokio::time::Instant;

impl Broker {
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
            let p = &self.peers[&peer];
            let wanted = p
                .filter
                .matches_request(req.context.as_deref(), p.node_of(req));
            match (before.sees(uid) && wanted, after.sees(uid) && wanted) {
                (false, true) => fx.frame(peer, self.ui_frame(id, req, now)),
                (true, false) => {
                    fx.frame(peer, encode_fast::withdrawn(id, WithdrawReason::Withdrawn))
                }
                _ => {}
            }
        }
    }

    /// Whether `peer` is connected and may act as a UI (subscribe, watch, report
    /// notifications); one that may not is sent the refusal.
    pub(super) fn may_be_ui(&self, peer: PeerId, fx: &mut Effects) -> bool {
        let Some(p) = self.peers.get(&peer) else {
            return false;
        };
        if !p.info.rights.ui {
            let err = BrokerError::NotAUi(p.info.uid);
            fx.error(peer, FrameError::new(err.code(), err.to_string()));
            return false;
        }
        true
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
        if !self.may_be_ui(peer, fx) {
            return;
        }
        let p = &self.peers[&peer];
        // What a UI subscribing again had and no longer asks for leaves its screen.
        if let Some(cursor) = p.ui.filter(|_| p.filter != filter) {
            for (seq, id, req) in self.pending.iter() {
                if cursor.has_seen(seq)
                    && p.shown(req)
                    && !filter.matches_request(req.context.as_deref(), p.node_of(req))
                {
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
                .filter(|(_, _, r)| filter.matches_request(r.context.as_deref(), p.node_of(r)))
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
        if !self.may_be_ui(peer, fx) {
            return;
        }
        let p = self.peers.get_mut(&peer).expect("checked above");
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

    /// Sends a catching-up UI more pending requests: up to `budget.frames` frames and
    /// `budget.bytes` bytes (a replay fits the UI's queue by construction, counted in bytes,
    /// not frames), except that a first frame over `budget.bytes` goes alone when it fits in
    /// `budget.room`. Once it has them all it becomes live (in the same step, so nothing falls
    /// between replay and live). More to come: `More` (asked again when its queue has room)
    /// or `Blocked` (nothing sent: the next frame needs a drained queue).
    pub fn replay(
        &mut self,
        peer: PeerId,
        budget: ReplayBudget,
        now: Instant,
        fx: &mut Effects,
    ) -> ReplayStep {
        let Some(p) = self.peers.get(&peer) else {
            return ReplayStep::Done;
        };
        let Some(Cursor::CatchingUp(last)) = p.ui else {
            return ReplayStep::Done;
        };
        // Other users' questions, and those its filter leaves out, are passed over (the cursor
        // moves past them) unseen.
        let mut cursor = last;
        let mut sent = 0;
        let mut bytes = 0usize;
        let mut more = false;
        for (seq, id, req) in self.pending.after(last) {
            if p.shown(req) {
                if sent == budget.frames {
                    more = true;
                    break;
                }
                let frame = self.ui_frame(id, req, now);
                let len = frame.len() + crate::protocol::LENGTH_PREFIX_BYTES;
                let fits = bytes + len <= budget.bytes || (sent == 0 && len <= budget.room);
                if !fits {
                    more = true;
                    break;
                }
                fx.frame(peer, frame);
                bytes += len;
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
        match (more, sent) {
            (false, _) => ReplayStep::Done,
            (true, 0) => ReplayStep::Blocked,
            (true, _) => {
                fx.replay.push(peer);
                ReplayStep::More
            }
        }
    }

    /// The request as a UI is sent it now: with `node` once federated.
    pub(super) fn ui_frame(&self, id: &str, req: &Pending, now: Instant) -> Bytes {
        let (node, now) = match (req.origin.remote_node(), &self.fed) {
            // The UI is told the origin's time left, not the grace this node adds.
            (Some(origin), _) => (Some(&**origin), now + REMOTE_GRACE),
            (None, Some(f)) => (Some(&*f.node), now),
            (None, None) => (None, now),
        };
        let timeout_ms = req.deadline.saturating_duration_since(now).as_millis() as u64;
        let context = req.context.as_deref();
        req.body
            .ui_frame(id, timeout_ms, &req.producer_info, context, node)
    }

    /// The withdrawal of `req`; once federated it names the request's node and, when a UI
    /// answered, which UI on which node.
    pub(super) fn withdrawn_frame(
        &self,
        id: &str,
        req: &Pending,
        reason: WithdrawReason,
        answered_by: Option<&UiInfo>,
    ) -> Bytes {
        let Some(f) = self.fed.as_ref() else {
            return req.body.withdrawn_frame(id, reason, None, None);
        };
        let node = req.origin.remote_node().unwrap_or(&f.node);
        req.body
            .withdrawn_frame(id, reason, Some(node), answered_by)
    }
}

/// What one replay step may send (see [`Broker::replay`]).
#[derive(Debug, Clone, Copy)]
pub struct ReplayBudget {
    pub frames: usize,
    pub bytes: usize,
    /// What the UI's queue takes now, for a first frame over `bytes`.
    pub room: usize,
}

/// How a replay step left the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayStep {
    /// Caught up: live.
    Done,
    /// More to send, once its queue has room (it is on `Effects::replay`).
    More,
    /// Nothing sent: the next frame is larger than the room left; ask again once the queue
    /// is drained.
    Blocked,
}
