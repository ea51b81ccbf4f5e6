//! The broker's side of the store (when askbusd has one): what it must persist (appended to
//! `Effects::durable` for the hub, which stores it before delivering the frames of the same
//! operation), producers that are away (their requests wait `resume_grace` for them to
//! re-attach instead of ending `producer-gone`), requests that ended while their producer was
//! away (kept, with the very frame it is owed, until it re-attaches or the grace ends), and
//! requests restored at start. Without a store none of this runs: protocol v1 exactly.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::time::{Duration, Instant};

use super::body::{Body, Origin};
use super::end::Ended;
use super::pending::Pending;
use super::{Broker, Effects, PeerId, Valid};
use crate::protocol::{End, ProducerInfo, RequestContext};
use crate::questions::DaemonOutcome;

pub use crate::protocol::DecidedBy;

/// The UI behind an answer, beyond what `UiInfo` tells producers: its uid (kernel), the `via`
/// it claimed, and the `user` its answer named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decider {
    pub uid: Option<u32>,
    pub via: Option<String>,
    pub user: Option<String>,
    /// Set when a policy rule decided, not a UI.
    pub rule: Option<serde_json::Value>,
    /// A person decided outside askbus, as its producer said withdrawing it
    /// (`answered-elsewhere`): `uid` is then the producer's, `via` what it claimed.
    pub elsewhere: bool,
}

/// A request accepted here, as it is stored.
#[derive(Debug)]
pub struct AskedRecord {
    pub id: Arc<str>,
    pub body: Body,
    pub producer: ProducerInfo,
    pub context: Option<Box<RequestContext>>,
    pub accepted_at: Instant,
    pub deadline: Instant,
    pub timeout_ms: u64,
}

/// A request's end, as it is stored.
#[derive(Debug)]
pub struct EndedRecord {
    pub id: Arc<str>,
    pub end: End,
    pub decided_by: DecidedBy,
    /// The producer's terminal frame (`None`: it was owed nothing, being gone).
    pub response: Option<Bytes>,
    /// Whether that frame went out now (else it waits for the producer to re-attach).
    pub delivered: bool,
}

/// What the store must hold before the frames of the same operation go out.
#[derive(Debug)]
pub enum Durable {
    Asked(Box<AskedRecord>),
    Ended(Box<EndedRecord>),
    /// A re-attached producer was sent the response it was owed.
    Delivered(Arc<str>),
    /// The grace ended with the response still owed: it never will be delivered.
    Abandoned(Arc<str>),
}

/// A request that ended while its producer was away.
#[derive(Debug)]
pub(super) struct Undelivered {
    uid: u32,
    body: Body,
    frame: Bytes,
    until: Instant,
    /// Recorded delivered (handed to its connected producer just before a crash, which may
    /// have cut it off): kept for a resend, and still `delivered` if none comes.
    sent: bool,
}

/// The broker's durability state (only with a store).
#[derive(Debug, Default)]
pub(super) struct Durability {
    pub(super) grace: Duration,
    /// Pending local requests whose producer is away, and when their grace ends.
    away: HashMap<Arc<str>, Instant>,
    undelivered: HashMap<Arc<str>, Undelivered>,
    /// The grace ends of both, in order.
    graces: BTreeSet<(Instant, Arc<str>)>,
    /// Whether the store can write (new requests are refused `store-unavailable` when not).
    writable: Option<Arc<AtomicBool>>,
}

/// A stored request to make pending again at start.
#[derive(Debug)]
pub struct Restored {
    pub request: Valid,
    pub producer: ProducerInfo,
    pub accepted_at: Instant,
    pub deadline: Instant,
    pub timeout_ms: u64,
}

impl Broker {
    /// Turns durability on: producers that go away get `grace` to re-attach.
    /// `writable` says whether the store can take new requests now.
    pub fn set_durable(&mut self, grace: Duration, writable: Arc<AtomicBool>) {
        self.durable = Some(Durability {
            grace,
            writable: Some(writable),
            ..Durability::default()
        });
    }

    /// Whether a new request would be refused `store-unavailable`.
    pub(super) fn store_unwritable(&self) -> bool {
        self.durable
            .as_ref()
            .and_then(|d| d.writable.as_ref())
            .is_some_and(|w| !w.load(Ordering::Relaxed))
    }

    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }

    /// A stored request, pending again after a restart, its producer away. One whose
    /// deadline has passed ends `timeout` at once (recorded; owed to a producer that
    /// re-attaches), never shown to a UI.
    pub fn restore(&mut self, r: Restored, now: Instant, fx: &mut Effects) {
        let Some(d) = &self.durable else { return };
        let until = now + d.grace;
        let Valid {
            correlation_id,
            context,
            body,
            ..
        } = r.request;
        let id: Arc<str> = Arc::from(correlation_id);
        if self.pending.contains(&id) {
            return;
        }
        self.stats.accepted += 1;
        let pending = Pending {
            seq: self.pending.next_seq(),
            origin: Origin::Local {
                producer: None,
                shared: false,
            },
            producer_info: r.producer,
            context: context.map(Box::new),
            body,
            accepted_at: r.accepted_at,
            deadline: r.deadline,
            timeout_ms: r.timeout_ms,
        };
        if r.deadline <= now {
            let ended = Ended::unanswered(&id, &pending, DaemonOutcome::Timeout);
            return self.end(&id, pending, ended, now, fx);
        }
        self.away(id.clone(), until);
        self.pending.insert(id, pending);
    }

    /// A stored request that ended while its producer was away, owed `frame` until the
    /// grace (counted from this start) ends. `sent`: it was handed to its producer just
    /// before the daemon stopped, so the producer may or may not have it; a resend gets it
    /// again, and the record stays `delivered` if none comes.
    pub fn restore_undelivered(
        &mut self,
        id: &str,
        uid: u32,
        body: Body,
        frame: Bytes,
        now: Instant,
        sent: bool,
    ) {
        let id: Arc<str> = Arc::from(id);
        // An id reused since (pending or owed again) is that later request's.
        let reused = self.pending.contains(&id);
        let Some(d) = &mut self.durable else { return };
        if sent && (reused || d.undelivered.contains_key(&id)) {
            return;
        }
        let until = now + d.grace;
        d.graces.insert((until, id.clone()));
        d.undelivered.insert(
            id,
            Undelivered {
                uid,
                body,
                frame,
                until,
                sent,
            },
        );
    }

    fn away(&mut self, id: Arc<str>, until: Instant) {
        let d = self.durable.as_mut().expect("durable");
        d.graces.insert((until, id.clone()));
        d.away.insert(id, until);
    }

    /// With a store, a producer's connection dropping does not end its requests: they wait
    /// the grace for it to re-attach. UIs are told nothing.
    pub(super) fn detach(&mut self, peer: PeerId, now: Instant) {
        let grace = self.durable.as_ref().expect("durable").grace;
        for id in self.pending.owned_by(peer) {
            self.pending.set_producer(&id, None);
            self.away(id, now + grace);
        }
    }

    /// A producer asks with an id that is pending or owed: with the same uid, kind and body
    /// while the original producer is away, it re-attaches (`true`: handled). Anything else
    /// is left to `ask` (a duplicate, or a new request).
    pub(super) fn reattach(
        &mut self,
        peer: PeerId,
        uid: u32,
        id: &str,
        body: &Body,
        fx: &mut Effects,
    ) -> bool {
        let Some(d) = &mut self.durable else {
            return false;
        };
        if let Some(u) = d.undelivered.get(id) {
            if u.uid != uid || !same(&u.body, body) {
                return false;
            }
            let (id, u) = d.undelivered.remove_entry(id).expect("found above");
            d.graces.remove(&(u.until, id.clone()));
            fx.frame(peer, u.frame);
            fx.durable.push(Durable::Delivered(id));
            return true;
        }
        let Some(req) = self.pending.get(id) else {
            return false;
        };
        let mine = matches!(req.origin, Origin::Local { producer: None, .. })
            && req.producer_info.uid == uid
            && same(&req.body, body);
        if !mine {
            return false;
        }
        if let Some((id, until)) = d.away.remove_entry(id) {
            d.graces.remove(&(until, id));
        }
        self.pending.set_producer(id, Some(peer));
        true
    }

    /// Whether `id` is owed to a producer that is away (so not free for a new request).
    pub(super) fn is_owed(&self, id: &str) -> bool {
        self.durable
            .as_ref()
            .is_some_and(|d| d.undelivered.contains_key(id))
    }

    /// The durable part of an end: stored, and kept for its producer when it is away.
    pub(super) fn ended_durably(
        &mut self,
        id: &str,
        req: &Pending,
        ended: &Ended,
        fx: &mut Effects,
        now: Instant,
    ) {
        let Some(d) = &mut self.durable else { return };
        if req.origin.is_remote() {
            return;
        }
        let response = ended.told.as_ref().map(|t| t.encode());
        let here = req.origin.producer().is_some();
        let until = match d.away.remove_entry(id) {
            Some((key, until)) => {
                d.graces.remove(&(until, key));
                until
            }
            None => now + d.grace,
        };
        if let (false, Some(frame)) = (here, &response) {
            let key: Arc<str> = Arc::from(id);
            d.graces.insert((until, key.clone()));
            d.undelivered.insert(
                key,
                Undelivered {
                    uid: req.producer_info.uid,
                    body: req.body.clone(),
                    frame: frame.clone(),
                    until,
                    sent: false,
                },
            );
        }
        let decided_by = ended.decided_by(req);
        fx.durable.push(Durable::Ended(Box::new(EndedRecord {
            id: Arc::from(id),
            end: ended.end,
            decided_by,
            response,
            delivered: here,
        })));
    }

    /// The next grace end, if any.
    pub(super) fn next_grace(&self) -> Option<Instant> {
        self.durable
            .as_ref()
            .and_then(|d| d.graces.first().map(|(at, _)| *at))
    }

    /// Ends the graces that are over: an away producer's request ends `producer-gone`; a
    /// response nobody came for is dropped (its record stays, undelivered).
    pub(super) fn expire_graces(&mut self, now: Instant, fx: &mut Effects) {
        loop {
            let Some(d) = &mut self.durable else { return };
            let Some((at, id)) = d.graces.first().cloned() else {
                return;
            };
            if at > now {
                return;
            }
            d.graces.remove(&(at, id.clone()));
            if let Some(u) = d.undelivered.remove(&id) {
                if !u.sent {
                    fx.durable.push(Durable::Abandoned(id));
                }
                continue;
            }
            if d.away.remove(&id).is_none() || !self.pending.contains(&id) {
                continue;
            }
            let req = self.take(
                &id,
                crate::protocol::WithdrawReason::ProducerGone,
                None,
                None,
                fx,
            );
            self.end(&id, req, Ended::untold(End::ProducerGone), now, fx);
        }
    }

    /// The UI's info as recorded for a local answer.
    pub(super) fn decider_of(&self, peer: PeerId, user: Option<String>) -> Option<Decider> {
        let p = self.peers.get(&peer)?;
        Some(Decider {
            uid: Some(p.info.uid),
            via: p.via.clone(),
            user,
            rule: None,
            elsewhere: false,
        })
    }
}

/// Whether a resend is the same request: same kind and the same normalized questions, or
/// the same tool call, details, server name and outcomes (context and annotations aside).
fn same(a: &Body, b: &Body) -> bool {
    match (a, b) {
        (Body::Questions(x), Body::Questions(y)) => x.questions == y.questions,
        (Body::Approval(x), Body::Approval(y)) => {
            x.tool_call == y.tool_call
                && x.details == y.details
                && x.server_name == y.server_name
                && x.outcomes == y.outcomes
        }
        _ => false,
    }
}
