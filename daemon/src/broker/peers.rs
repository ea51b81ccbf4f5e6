//! The peers the broker knows: who each connection is, what the access rules let it do, and
//! how far a UI has got through the pending table.

use std::sync::Arc;

use super::pending::Pending;
use crate::protocol::SubscribeFilter;

/// A connection, as the broker names it.
pub type PeerId = u64;

/// What the daemon knows of a connected peer (from SO_PEERCRED, the access rules and
/// `hello`/`subscribe`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerInfo {
    pub client: Option<String>,
    pub pid: Option<i32>,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (SO_PEERGROUPS), for group rules re-evaluated on reload.
    pub groups: Vec<u32>,
    pub rights: Rights,
}

/// What the access rules let a peer do. Isolation is routing: a UI (or watcher) sees, and
/// may answer, only questions from producers of its own uid, unless it is an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights {
    pub produce: bool,
    pub ui: bool,
    pub operator: bool,
}

impl Default for Rights {
    /// A peer of the daemon's own uid: it may do anything but see other users' questions.
    fn default() -> Self {
        Rights {
            produce: true,
            ui: true,
            operator: false,
        }
    }
}

impl PeerInfo {
    /// Whether this peer, as a UI or watcher, may see a question asked by `producer_uid`.
    pub fn sees(&self, producer_uid: u32) -> bool {
        self.rights.ui && (self.rights.operator || self.uid == producer_uid)
    }
}

/// Connections by what they do, for the metrics. A peer that did several things counts
/// once, as the first of: UI, watcher, producer; `idle` ones have done none yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoleCounts {
    pub producer: usize,
    pub ui: usize,
    pub watcher: usize,
    pub idle: usize,
}

/// How far a UI has got through the pending table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    /// Receiving the replay; every request with a sequence number up to this one was sent.
    /// Live broadcasts skip it: the replay reaches them in order.
    CatchingUp(u64),
    Live,
}

impl Cursor {
    pub fn has_seen(self, seq: u64) -> bool {
        match self {
            Cursor::CatchingUp(last) => seq <= last,
            Cursor::Live => true,
        }
    }
}

#[derive(Debug)]
pub struct Peer {
    pub info: PeerInfo,
    /// `Some` once the connection subscribed as a UI.
    pub ui: Option<Cursor>,
    /// Whether it ever sent an ask-user-request (its role, for the metrics).
    pub asked: bool,
    /// As a UI: which requests it asked to be shown (`subscribe`'s filter).
    pub filter: SubscribeFilter,
    /// Federation: this node's name, the node of the requests asked here (for a `node`
    /// filter).
    pub node: Option<Arc<str>>,
    /// The kind of UI it claimed to be (`via` in `hello` or `subscribe`), for `decidedBy`.
    pub via: Option<String>,
}

impl Peer {
    /// Whether this UI is (or would be) sent the request: it may see its producer's
    /// questions and asked for ones like it.
    pub fn shown(&self, req: &Pending) -> bool {
        self.info.sees(req.producer_info.uid)
            && self
                .filter
                .matches_request(req.context.as_deref(), self.node_of(req))
    }

    /// The node `req` was asked on, as far as this UI's filter is concerned.
    pub fn node_of<'a>(&'a self, req: &'a Pending) -> Option<&'a str> {
        req.origin
            .remote_node()
            .map(|n| &**n)
            .or(self.node.as_deref())
    }
}
