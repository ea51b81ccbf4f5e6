//! A notifier's delivery report (`notify-report`, a UI → daemon frame): `askbus notify` (or any
//! notifier) tells the daemon what it delivered, so deliveries are counted in the daemon's
//! metrics and shown to `watch` observers like the bus's other events. Nothing is answered.

use serde::{Deserialize, Serialize};

/// Longest sink name, in characters.
pub const MAX_SINK_CHARS: usize = 32;
/// Most correlationIds one report names.
pub const MAX_REPORT_IDS: usize = 1000;
/// Longest error text, in characters.
pub const MAX_REPORT_ERROR_CHARS: usize = 1024;

/// How one delivery went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotifyResult {
    /// The notification was shown or the push accepted.
    Sent,
    /// The delivery failed for good (after its retries).
    Failed,
    /// A request was answered from a notification (a button or a link).
    Answered,
}

impl NotifyResult {
    pub const ALL: [NotifyResult; 3] = [
        NotifyResult::Sent,
        NotifyResult::Failed,
        NotifyResult::Answered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyResult::Sent => "sent",
            NotifyResult::Failed => "failed",
            NotifyResult::Answered => "answered",
        }
    }

    pub fn parse(s: &str) -> Option<NotifyResult> {
        NotifyResult::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// A `notify-report` as the daemon reads it (fields checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyReport {
    /// `desktop`, `ntfy`, `webhook`, `slack`, `link`…: lowercase letters, digits and `-`.
    pub sink: String,
    pub result: NotifyResult,
    /// The requests the delivery was about (a batch names several).
    pub correlation_ids: Vec<String>,
    /// What went wrong (`failed` only).
    pub error: Option<String>,
}

/// A report's facts on the `notify` bus-event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifyFacts {
    pub sink: String,
    pub result: NotifyResult,
    /// How many requests it was about.
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether `s` is a valid sink name.
pub fn valid_sink(s: &str) -> bool {
    !s.is_empty()
        && s.chars().count() <= MAX_SINK_CHARS
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
