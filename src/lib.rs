//! askbus: a local broker of agent-to-human questions. `askbusd` carries Gemini CLI's
//! `ask-user-request` / `ask-user-response` messages between agent processes (producers) and
//! UI frontends (subscribers) over a Unix socket.
//!
//! Layers, each depending only on those above it:
//! - [`protocol`]: frames, codec, error codes (depends on nothing else here);
//! - [`questions`]: ask_user validation, normalization and tool results, as the reference;
//! - [`broker`]: pending table, routing, deadlines: pure state;
//! - [`hub`], [`outbox`], [`connection`], [`server`]: the daemon's I/O around the broker;
//! - [`access`], [`config`], [`metrics`], [`systemd`]: running askbusd as a service (access
//!   rules and quotas, the config file, Prometheus metrics, sd_notify and socket activation);
//! - [`client`]: the async Rust client that producers and UIs use.

// The client crate's modules, re-exported so `crate::protocol` reads the same inside the daemon.
pub use askbus::{client, protocol, questions};

pub mod access;
pub mod broker;
pub mod config;
pub mod connection;
pub mod federation;
pub mod hub;
pub mod metrics;
pub mod outbox;
pub mod paths;
pub mod server;
pub mod systemd;
pub mod telemetry;

/// The daemon's name and version, as `welcome` and `stats` carry it.
pub const SERVER_NAME: &str = concat!("askbusd/", env!("CARGO_PKG_VERSION"));
