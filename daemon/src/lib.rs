//! askbusd as a library: the broker of agent-to-human questions and approvals. It carries
//! Gemini CLI's `ask-user-request` / `ask-user-response` messages (and tool confirmations)
//! between agent processes (producers) and UI frontends (subscribers) over a Unix socket, and
//! owns everything the daemon does with them: the pending table, routing and deadlines, the
//! connections, the store, policy decisions, federation over NATS (the `federation` cargo
//! feature, on by default: its task and async-nats), telemetry and metrics. It
//! depends on the client crate `askbus` (the protocol) and never on the `askbus` command; the
//! binary `askbusd` (the root package) reads the command line and runs [`server::Daemon`].
//!
//! Layers, each depending only on those above it (`tests/e2e/layering.rs` checks every edge):
//! - [`protocol`]: frames, codec, error codes (depends on nothing else here);
//! - [`questions`]: ask_user validation, normalization and tool results, as the reference;
//! - [`approvals`]: what a tool-confirmation request must hold, and the agent's "not approved" texts;
//! - [`client`]: the async Rust client that producers and UIs use (protocol, and the client
//!   crate's `trust`: which daemon a client agrees to talk to);
//! - [`paths`]: where the socket (the client's resolution), telemetry and config live by
//!   default, and the safe creation of socket and telemetry paths;
//! - [`telemetry::record`]: one request's end, as a telemetry line;
//! - [`broker`]: pending table, routing, deadlines: pure state (protocol, questions, approvals,
//!   record);
//! - [`intake`]: the one door every frame passes: a payload becomes a typed request (questions
//!   validated and normalized, an approval checked: fast path first, the reference alone when
//!   it gives up) or a typed refusal (broker types, protocol, questions, approvals);
//! - `access`: who may connect, and as what;
//! - `outbox`: a connection's bounded queue of encoded frames;
//! - [`telemetry`]: the writer thread and the daemon-wide counters;
//! - `metrics`: the Prometheus registry (reads broker snapshots, counters and the
//!   federation summary);
//! - [`hub`]: the broker behind a lock, delivering its effects into outboxes, and its end of
//!   the link to the federation task (`hub::federation`);
//! - `connection`: one peer's reads and writes;
//! - [`config`]: the config file, resolved into a [`config::DaemonConfig`];
//! - [`server`]: the accept loop, the `/metrics` endpoint, reloads and shutdown; [`systemd`]:
//!   sd_notify and sockets;
//! - [`federation`]: the task that speaks to the other nodes over NATS (reads the hub; like a
//!   connection, it flushes the outboxes a burst of its messages filled once, with an
//!   `outbox::Batch`).
//!
//! One question through the code:
//! 1. `connection::Conn::handle` hands the frame to `intake::read`: `protocol::parse_fast` and
//!    `questions::fast::check` (else the reference parser and `questions::normalize`, which
//!    word every error) make a `broker::Valid`, which `Conn::handle`'s one `match` hands on;
//! 2. `Hub::run_in` locks the broker; `Broker::ask` puts it in the `PendingTable` and returns
//!    `Effects` (the request encoded once by `UiRequestRef::encode` for every live UI);
//! 3. `Hub::deliver` copies each frame into the peer's bounded `Outbox`; `Batch::flush` writes;
//! 4. a UI's answer comes back the same way to `Broker::respond`, and on to
//!    `Broker::answer` (one road for both kinds), which takes it out of the table and `end`s
//!    it with an `End`: an ack to the UI, withdrawals to the other UIs, `encode_fast::response`
//!    to the producer, a `telemetry::Record` and a watcher event;
//! 5. `Hub::deliver` stamps and hands the record to the `TelemetrySink` (written off-thread).
//!
//! An approval goes the same way: in `intake::read`, `approvals::fast::check` (else `approvals::check`, the
//! reference) makes an `approvals::ValidApproval`, which becomes a `broker::Valid` with an
//! approval `Body` for the same `Broker::ask`; UIs receive it through `UiApprovalRef::encode`,
//! and a UI's decision goes to `Broker::decide`, the same `Broker::answer`. What differs by
//! kind is on `broker::Body` (and the producer's reply on `broker::Told`): a new kind is one
//! more variant the compiler chases.

// The client crate's modules, re-exported so `crate::protocol` reads the same inside the daemon.
pub use askbus::{approvals, client, protocol, questions};

pub(crate) mod access;
pub mod broker;
pub mod config;
pub(crate) mod connection;
pub mod federation;
pub mod hub;
pub mod intake;
pub(crate) mod metrics;
pub(crate) mod outbox;
pub mod paths;
pub mod server;
pub mod store;
pub mod systemd;
pub mod telemetry;

/// The daemon's name and version, as `welcome` and `stats` carry it.
pub const SERVER_NAME: &str = concat!("askbusd/", env!("CARGO_PKG_VERSION"));
