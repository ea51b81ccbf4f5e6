//! The broker: pending questions keyed by correlationId, which UIs have seen which, deadlines,
//! and the end of every request. Pure state: it never touches a socket and never awaits; each
//! operation appends what must be sent (and logged) to an [`Effects`], which the caller
//! delivers through the connections' bounded queues.
//!
//! - `pending`: the pending table, the one type that keeps a request and its indexes in step;
//! - `peers`: who each connection is and what it may do;
//! - `body`: what a request is (questions or an approval) and where it came from, as types;
//! - `durable`: with a store: what to persist, producers away and re-attaching, restores;
//! - `request`: a request validated outside the lock;
//! - `effects`: what an operation asks its caller to do (frames, records, events, and what
//!   the federation task must tell the other nodes);
//! - `uis`: subscribe, replay, watch and rights: which UI is shown which request, and the
//!   frames that show it and take it away;
//! - `admit`: a request entering (quotas, no-UI policy, first delivery), refusals, cancels;
//! - `answer`: a UI's answer of either kind, one road (`answer`; `respond` and `decide` are
//!   its doors), local or from another node;
//! - `end`: every request's one end (`take`, `end`), timeouts and shutdown;
//! - `remote`: federation's shared and remote questions;
//! - this file: the broker's state, its limits and counts, and peers arriving and leaving.

mod admit;
mod answer;
mod body;
mod durable;
mod effects;
mod end;
mod error;
mod notify;
mod peers;
mod pending;
mod remote;
mod request;
mod stats;
mod uis;

use std::collections::{BTreeSet, HashMap};

use tokio::time::Instant;

pub use body::{Body, Origin, Told};
/// The `via` values `decidedBy` knows (PROTOCOL.md "Durability"); a UI claiming another is
/// recorded as `client`.
pub const KNOWN_VIAS: [&str; 12] = [
    "tui",
    "web",
    "link",
    "notify",
    "cli",
    "mcp",
    "client",
    "federation",
    "telegram",
    "slack",
    "discord",
    "acp",
];

pub use durable::{AskedRecord, DecidedBy, Decider, Durable, EndedRecord, Restored};
pub use effects::{Acked, Answer, Effects, FedOut, Forward, Msg, SharedEnd, SharedQuestion};
pub use error::BrokerError;
pub use peers::{PeerId, PeerInfo, Rights, RoleCounts};
pub use remote::{FedPolicy, RemoteQuestion, RemoteRefusal};
pub use request::Valid;
pub use stats::{ApprovalStats, BrokerStats, EndCounts};
pub use uis::{ReplayBudget, ReplayStep};

use peers::Peer;
use pending::PendingTable;

use crate::protocol::{End, NoUiPolicy, SubscribeFilter, WithdrawReason};

/// The largest tool result the broker builds for an answer (the response frame stays under
/// the 16 MiB clients accept).
pub const MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

/// The broker's counts at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub stats: BrokerStats,
    pub roles: RoleCounts,
    pub pending: usize,
    /// Approvals the policy rules decided: allow, deny.
    pub policy_decisions: [u64; 2],
}

/// One uid's share of the bus now (see [`Broker::counts_of_uid`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UidCounts {
    pub connections: usize,
    pub producers: usize,
    pub uis: usize,
    pub pending: usize,
}

/// The limits and defaults that apply to new requests; replaceable at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    pub no_ui: NoUiPolicy,
    pub max_pending_per_connection: usize,
    /// Pending requests all connections of one uid may have (dbus-broker's per-user quota).
    pub max_pending_per_uid: usize,
    /// Bytes the pending questions of one uid may hold (their normalized text and ids): a
    /// count alone lets one user pin gigabytes with large questions.
    pub max_pending_bytes_per_uid: usize,
    pub max_pending_total: usize,
}

/// The default of [`Limits::max_pending_bytes_per_uid`]: 64 MiB, 64 questions of the largest
/// frame askbusd accepts by default, thousands of ordinary ones.
pub const DEFAULT_MAX_PENDING_BYTES_PER_UID: usize = 64 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            default_timeout_ms: 600_000,
            max_timeout_ms: 86_400_000,
            no_ui: NoUiPolicy::Wait,
            max_pending_per_connection: 128,
            max_pending_per_uid: 262_144,
            max_pending_bytes_per_uid: DEFAULT_MAX_PENDING_BYTES_PER_UID,
            max_pending_total: 262_144,
        }
    }
}

/// The broker's whole state.
#[derive(Debug)]
pub struct Broker {
    limits: Limits,
    peers: HashMap<PeerId, Peer>,
    /// Subscribed UIs, in a stable order so broadcasts are deterministic.
    uis: BTreeSet<PeerId>,
    /// Observers of the bus (`watch`).
    watchers: BTreeSet<PeerId>,
    pending: PendingTable,
    stats: BrokerStats,
    /// Set by `shutdown`: requests that still arrive are answered `shutdown` at once.
    closed: bool,
    /// Set when the daemon is federated.
    fed: Option<FedPolicy>,
    /// How many of `pending` are remote.
    remote_len: usize,
    /// How many of `pending` are local and shared with the other nodes: a heartbeat asks,
    /// and counting them would cost a walk of every pending request each time.
    shared_len: usize,
    /// What each origin node's remote questions hold here: they count against the local
    /// limits per origin node, as one uid's do (see `remote::RemoteLoad`).
    remote_load: HashMap<std::sync::Arc<str>, remote::RemoteLoad>,
    /// Peers that shut their write side and still have something to receive (see
    /// [`Broker::half_close`]).
    half_closed: BTreeSet<PeerId>,
    /// With a store: what it must hold, and producers that are away.
    durable: Option<durable::Durability>,
    /// The policy rules' decider: asked about every local approval before any UI sees it.
    policy: Option<PolicyDecider>,
    /// Approvals the rules decided, by decision: allow, deny.
    pub policy_decisions: [u64; 2],
}

/// The policy rules (the hub holds them; the broker only asks): a synchronous, pure lookup
/// over the rules in force, `Some` when a rule allows or denies, `None` to ask a person.
pub type PolicyDecider = std::sync::Arc<askbus_policy::daemon::PolicySet>;

impl Broker {
    /// Sets (or clears) the policy decider.
    pub fn set_policy(&mut self, policy: Option<PolicyDecider>) {
        self.policy = policy;
    }

    pub fn new(limits: Limits) -> Self {
        Broker {
            limits,
            peers: HashMap::new(),
            uis: BTreeSet::new(),
            watchers: BTreeSet::new(),
            pending: PendingTable::default(),
            stats: BrokerStats::default(),
            closed: false,
            fed: None,
            remote_len: 0,
            shared_len: 0,
            remote_load: HashMap::new(),
            half_closed: BTreeSet::new(),
            durable: None,
            policy: None,
            policy_decisions: [0; 2],
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// New limits apply to requests accepted from now on; pending ones keep their deadlines.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    pub fn stats(&self) -> &BrokerStats {
        &self.stats
    }

    /// The counts at this moment, for the metrics.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            stats: self.stats.clone(),
            roles: self.role_counts(),
            pending: self.pending_len(),
            policy_decisions: self.policy_decisions,
        }
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    pub fn ui_count(&self) -> usize {
        self.uis.len()
    }

    /// The subscribed UIs of this node, oldest connection first (`askbus doctor` lists them).
    pub fn ui_peers(&self) -> impl Iterator<Item = &Peer> {
        self.uis.iter().filter_map(|id| self.peers.get(id))
    }

    /// The policy rules approvals are checked against, when any.
    pub fn policy(&self) -> Option<&PolicyDecider> {
        self.policy.as_ref()
    }

    pub fn peer_count(&self) -> usize {
        self.peers.len()
    }

    /// Peers that asked at least one question still pending.
    pub fn producer_count(&self) -> usize {
        self.pending.producers()
    }

    pub fn connect(&mut self, peer: PeerId, info: PeerInfo) {
        self.peers.insert(
            peer,
            Peer {
                info,
                ui: None,
                asked: false,
                filter: SubscribeFilter::default(),
                node: self.fed.as_ref().map(|f| f.node.clone()),
                via: None,
            },
        );
    }

    /// What one uid has on the bus now, for its own `stats`: its connections, those with a
    /// request pending, its UIs, and its pending requests.
    pub fn counts_of_uid(&self, uid: u32) -> UidCounts {
        let mut c = UidCounts {
            pending: self.pending.count_of_uid(uid),
            ..UidCounts::default()
        };
        for (id, p) in self.peers.iter().filter(|(_, p)| p.info.uid == uid) {
            c.connections += 1;
            c.producers += usize::from(self.pending.count_of_producer(*id) > 0);
            c.uis += usize::from(p.ui.is_some());
        }
        c
    }

    /// Connections by role.
    pub fn role_counts(&self) -> RoleCounts {
        let mut c = RoleCounts::default();
        for (id, p) in &self.peers {
            if p.ui.is_some() {
                c.ui += 1;
            } else if self.watchers.contains(id) {
                c.watcher += 1;
            } else if p.asked {
                c.producer += 1;
            } else {
                c.idle += 1;
            }
        }
        c
    }

    /// Records the name a peer announced in `hello`.
    pub fn set_client(&mut self, peer: PeerId, client: String) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.info.client = Some(client);
        }
    }

    /// Records the kind of UI a peer claims to be (`via` in `hello` or `subscribe`), for
    /// `decidedBy`: one of [`KNOWN_VIAS`], anything else is `client`. `federation` is never
    /// taken from a claim: only an answer that came from another node is.
    pub fn set_via(&mut self, peer: PeerId, via: &str) {
        if let Some(p) = self.peers.get_mut(&peer) {
            let known = KNOWN_VIAS.contains(&via) && via != "federation";
            p.via = Some(if known { via } else { "client" }.to_owned());
        }
    }

    pub fn peer_info(&self, peer: PeerId) -> Option<&PeerInfo> {
        self.peers.get(&peer).map(|p| &p.info)
    }

    /// The connection closed: its pending requests are withdrawn from the UIs. A UI leaving
    /// changes nothing for pending requests; another UI can still answer them.
    pub fn disconnect(&mut self, peer: PeerId, now: Instant, fx: &mut Effects) {
        if self.peers.remove(&peer).is_none() {
            return;
        }
        self.half_closed.remove(&peer);
        self.uis.remove(&peer);
        self.watchers.remove(&peer);
        if self.durable.is_some() {
            // Its requests wait for it to re-attach (ending `producer-gone` after the grace).
            return self.detach(peer, now);
        }
        for id in self.pending.owned_by(peer) {
            let req = self.take(&id, WithdrawReason::ProducerGone, None, None, fx);
            // No one is left to tell: counted and logged like every other end.
            let ended = end::Ended::untold(End::ProducerGone);
            self.end(&id, req, ended, now, fx);
        }
    }

    /// The peer shut its write side (a one-shot producer: `nc -N`, `socat`, a script that
    /// closes stdin): it sends nothing more but still reads, so this is not a disconnect. Its
    /// pending requests stay until they end, and their responses are sent as usual; a watcher
    /// keeps its events. It stops being a UI, as it can no longer answer. Returns whether the
    /// connection has anything left to receive; once it has not, [`Broker::take_finished`]
    /// names it.
    pub fn half_close(&mut self, peer: PeerId) -> bool {
        let Some(p) = self.peers.get_mut(&peer) else {
            return false;
        };
        p.ui = None;
        self.uis.remove(&peer);
        let keep = self.pending.count_of_producer(peer) > 0 || self.watchers.contains(&peer);
        if keep {
            self.half_closed.insert(peer);
        }
        keep
    }

    /// The half-closed peers whose last request has ended (its response is queued): their
    /// connections close once it is written. Each is named once.
    pub fn take_finished(&mut self) -> Vec<PeerId> {
        if self.half_closed.is_empty() {
            return Vec::new();
        }
        let done: Vec<PeerId> = self
            .half_closed
            .iter()
            .copied()
            .filter(|&p| self.pending.count_of_producer(p) == 0 && !self.watchers.contains(&p))
            .collect();
        for p in &done {
            self.half_closed.remove(p);
        }
        done
    }
}

#[cfg(test)]
mod tests;
