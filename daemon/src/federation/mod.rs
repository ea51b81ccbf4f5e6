//! Federation over core NATS subjects (protocol v2): this node's link to the other askbusd
//! nodes. It owns the NATS connection (async-nats) and the node's subjects (layout in
//! proto/PROTOCOL.md, "Federation"): it publishes its shares, ends and beats on `P.q.<node>`,
//! serves its pending questions on `P.sync.<node>.<asker>`, takes answers on
//! `P.answer.<node>.<sender>`, and (when it shows remote questions) reads `P.q.*`. No
//! JetStream: nothing is stored on the server, so every subject a node publishes carries its
//! own name and the server's permissions alone say who may speak for whom.
//!
//! The broker stays pure: it hands what must cross NATS to this task through a bounded queue
//! (`FedLink`), and this task feeds what arrives back in as broker operations through the
//! hub. A remote node is one more origin: its questions are pending requests with an origin,
//! its UIs' answers are answers decided by the broker like a local UI's. `answers` carries
//! answers between a UI's node and the origin; `peers` follows the other nodes' messages
//! (sequence numbers, catch-up through sync, presence); `sync` serves and fetches pending
//! questions; `outgoing` publishes what this node tells the others and keeps it while NATS is
//! away; `wire` is the JSON that crosses NATS. The hub's end of the link is `hub::federation`.
//!
//! Every cross-node question passes here four times on two nodes, so the path is kept lean:
//! the messages waiting on a subscription are handled as one burst whose frames reach each
//! local peer in one write, forwarded answers are futures the task polls (not a task each),
//! and the JSON is written and read without `serde_json::Value` trees
//! (benches/runs/2026-12-06-fedperf.md).

pub(crate) mod config;
#[cfg(feature = "federation")]
mod node;

pub use crate::hub::federation::{unreachable, FedLink, FedStatus};
pub use config::{FederationConfig, FederationError, ShareUsers};
#[cfg(feature = "federation")]
pub use node::start;
