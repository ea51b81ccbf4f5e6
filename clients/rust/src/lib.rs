//! askbus: the client side of askbusd, the broker of agent-to-human questions.
//!
//! - [`protocol`]: protocol v1 on the wire (frames, codec, error codes); depends on nothing else;
//! - [`questions`]: Gemini CLI's `ask_user` rules (validation, normalization, tool results),
//!   byte-identical to `@google/gemini-cli-core`, so an agent can check questions before asking;
//! - [`approvals`]: Gemini CLI core's tool-confirmation rules (the shapes of the tool call and
//!   its details, the outcomes offered, what the agent is told when nobody approved);
//! - [`client`]: the async client producers and UIs use;
//! - [`trust`]: which daemon a client agrees to talk to (the socket path's owner check).
//!
//! The daemon (`askbusd`) and the `askbus` command live in the workspace's root package, which
//! depends on this crate; an agent author gets the client without the daemon's dependencies.

pub mod approvals;
#[cfg(feature = "client")]
pub mod client;
pub mod history;
pub mod protocol;
pub mod questions;
#[cfg(feature = "client")]
pub mod trust;

/// The README's examples, compiled as doctests so they stay true.
#[cfg(all(doctest, feature = "client"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
