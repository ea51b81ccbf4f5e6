//! The frames of protocol v1, by direction: what peers send the daemon ([`inbound`], read by
//! `super::parse`), what the daemon sends back ([`outbound`], one typed definition used to
//! encode and to decode), and what a client sends ([`client`]); plus the words both directions
//! share (policies, outcomes, reasons).

mod client;
mod inbound;
mod outbound;

use serde::{Deserialize, Serialize};

pub use client::ClientFrame;
pub use inbound::*;
pub use outbound::*;

/// Longest `client` name a peer may announce, in characters.
pub const MAX_CLIENT_CHARS: usize = 256;

/// What happens to a request when no UI is subscribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NoUiPolicy {
    /// Keep the request pending until a UI subscribes or it times out.
    #[default]
    Wait,
    /// Answer the producer at once with reason `no-ui`.
    Reject,
}

impl NoUiPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            NoUiPolicy::Wait => "wait",
            NoUiPolicy::Reject => "reject",
        }
    }

    pub fn parse(s: &str) -> Option<NoUiPolicy> {
        match s {
            "wait" => Some(NoUiPolicy::Wait),
            "reject" => Some(NoUiPolicy::Reject),
            _ => None,
        }
    }
}

/// How a request ended, as its producer is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Answered,
    Dismissed,
    Timeout,
    NoUi,
    Withdrawn,
    Shutdown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Dismissed => "dismissed",
            Outcome::Timeout => "timeout",
            Outcome::NoUi => "no-ui",
            Outcome::Withdrawn => "withdrawn",
            Outcome::Shutdown => "shutdown",
        }
    }
}

/// Why a request left the UIs' screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WithdrawReason {
    /// Another UI answered (or dismissed) it first.
    Answered,
    Timeout,
    /// The producer sent ask-user-cancel.
    Withdrawn,
    ProducerGone,
    Shutdown,
}

impl WithdrawReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WithdrawReason::Answered => "answered",
            WithdrawReason::Timeout => "timeout",
            WithdrawReason::Withdrawn => "withdrawn",
            WithdrawReason::ProducerGone => "producer-gone",
            WithdrawReason::Shutdown => "shutdown",
        }
    }
}

/// A canonical decimal index ("0", "1", … without leading zeros), as JavaScript's integer-like
/// property keys are; anything else would sort differently in the reference's output.
pub(crate) fn question_index(key: &str) -> Option<usize> {
    let canonical = key == "0" || (!key.starts_with('0') && key.len() <= 3);
    if !canonical || !key.bytes().all(|b| b.is_ascii_digit()) || key.is_empty() {
        return None;
    }
    key.parse().ok()
}
