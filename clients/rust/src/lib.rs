//! askbus: the client side of askbusd, the broker of agent-to-human questions.
//!
//! - [`protocol`]: protocol v1 on the wire (frames, codec, error codes); depends on nothing else;
//! - [`questions`]: Gemini CLI's `ask_user` rules (validation, normalization, tool results),
//!   byte-identical to `@google/gemini-cli-core`, so an agent can check questions before asking;
//! - [`approvals`]: Gemini CLI core's tool-confirmation rules (the shapes of the tool call and
//!   its details, the outcomes offered, what the agent is told when nobody approved);
//! - [`client`]: the async client producers and UIs use;
//! - [`trust`]: which daemon a client agrees to talk to (the socket path's owner check);
//! - [`history`]: the history records a store keeps and `history` queries return (reading a
//!   store file is the `store` feature).
//!
//! Each of `questions`, `approvals` and `protocol::parse` has a reference, which decides and
//! words every error. The daemon's fast paths (a parser, validators and encoders that yield
//! exactly what the reference does, in one pass) are the non-default feature `fast`, hidden
//! from these docs and outside the crate's semver promise: askbusd and the fuzz targets enable
//! it, an agent never needs it.
//!
//! The daemon (`askbusd`, daemon/) and the `askbus` command (`askbus-cli`, cli/) depend on this
//! crate, never the reverse; an agent author gets the client without their dependencies.

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
