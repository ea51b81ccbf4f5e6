//! The frames of protocol v1, by direction: what peers send the daemon ([`inbound`], read by
//! `super::parse`), what the daemon sends back ([`outbound`], one typed definition used to
//! encode and to decode), and what a client sends ([`client`]); plus the words both directions
//! share (policies, outcomes, reasons).

mod approval;
mod client;
mod context;
mod decided;
mod history;
mod inbound;
mod notify;
mod outbound;

use serde::{Deserialize, Serialize};

pub use approval::*;
pub use client::ClientFrame;
pub use context::*;
pub use decided::DecidedBy;
pub use history::*;
pub use inbound::*;
pub use notify::*;
pub use outbound::*;

/// Longest `client` name a peer may announce, in characters.
pub const MAX_CLIENT_CHARS: usize = 256;

/// Longest `user` a UI's answer may name, in characters.
pub const MAX_USER_CHARS: usize = 256;

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

/// How a request ended, as the stats, the metrics, telemetry and watchers count it: one of
/// the six [`Outcome`]s its producer is told, or one of the two ends that send no response
/// (its producer disconnected; it was refused before becoming pending). Adding an end is one
/// variant here, which the compiler then chases through every count and list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    Answered,
    Dismissed,
    Timeout,
    NoUi,
    Withdrawn,
    Shutdown,
    ProducerGone,
    Rejected,
}

impl End {
    pub const COUNT: usize = 8;
    /// Every end, in the order stats and metrics list them.
    pub const ALL: [End; End::COUNT] = [
        End::Answered,
        End::Dismissed,
        End::Timeout,
        End::NoUi,
        End::Withdrawn,
        End::Shutdown,
        End::ProducerGone,
        End::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            End::ProducerGone => "producer-gone",
            End::Rejected => "rejected",
            other => other.outcome().expect("an outcome").as_str(),
        }
    }

    pub fn parse(s: &str) -> Option<End> {
        End::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Its place in [`End::ALL`], for counters kept as `[u64; End::COUNT]`.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What the producer was told, if it was told anything.
    pub fn outcome(self) -> Option<Outcome> {
        Some(match self {
            End::Answered => Outcome::Answered,
            End::Dismissed => Outcome::Dismissed,
            End::Timeout => Outcome::Timeout,
            End::NoUi => Outcome::NoUi,
            End::Withdrawn => Outcome::Withdrawn,
            End::Shutdown => Outcome::Shutdown,
            End::ProducerGone | End::Rejected => return None,
        })
    }

    /// A UI answered or dismissed it (what the answer-latency figures measure).
    pub fn by_ui(self) -> bool {
        matches!(self, End::Answered | End::Dismissed)
    }
}

impl From<Outcome> for End {
    fn from(o: Outcome) -> End {
        match o {
            Outcome::Answered => End::Answered,
            Outcome::Dismissed => End::Dismissed,
            Outcome::Timeout => End::Timeout,
            Outcome::NoUi => End::NoUi,
            Outcome::Withdrawn => End::Withdrawn,
            Outcome::Shutdown => End::Shutdown,
        }
    }
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_listed_once_in_index_order_and_name_themselves() {
        for (i, end) in End::ALL.into_iter().enumerate() {
            assert_eq!(end.index(), i);
            assert_eq!(End::parse(end.as_str()), Some(end));
            assert_eq!(
                serde_json::to_value(end).unwrap(),
                serde_json::Value::String(end.as_str().to_owned())
            );
            if let Some(outcome) = end.outcome() {
                assert_eq!(End::from(outcome), end);
                assert_eq!(outcome.as_str(), end.as_str());
            }
        }
        assert_eq!(End::parse("request"), None);
    }
}
