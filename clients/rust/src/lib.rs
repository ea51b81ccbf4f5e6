//! askbus: the client side of askbusd, the broker of agent-to-human questions.
//!
//! - [`protocol`]: protocol v1 on the wire (frames, codec, error codes); depends on nothing else;
//! - [`questions`]: Gemini CLI's `ask_user` rules (validation, normalization, tool results),
//!   byte-identical to `@google/gemini-cli-core`, so an agent can check questions before asking;
//! - [`client`]: the async client producers and UIs use;
//! - [`trust`]: which daemon a client agrees to talk to (the socket path's owner check).
//!
//! The daemon (`askbusd`) and the `askbus` command live in the workspace's root package, which
//! depends on this crate; an agent author gets the client without the daemon's dependencies.

#[cfg(feature = "client")]
pub mod client;
pub mod protocol;
pub mod questions;
#[cfg(feature = "client")]
pub mod trust;
