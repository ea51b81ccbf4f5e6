//! The `history` frame pair: a query of the records askbusd keeps in its store (its filter,
//! a page size and the cursor of the page before), and the answer (`ServerFrame::History`: the
//! records, newest first, and the cursor of the next page). The daemon isolates it by uid as
//! it does `pending`: a peer sees only the records of its own requests unless it is an operator.

use serde::{Deserialize, Serialize};

/// Records one `history` answer holds when the query names no `limit`.
pub const DEFAULT_HISTORY_LIMIT: u32 = 100;
/// Most records one `history` answer holds (`limit` above this is refused); page with `cursor`.
pub const MAX_HISTORY_LIMIT: u32 = 1000;

/// Which records a `history` query wants: every field set must match (as `askbus history`'s
/// options of the same names do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryFilter {
    /// One request's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Asked at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Asked at or before this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// `context.project`, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// `context.agent`: `name` matches `name` and `name/…`, as the subscribe filter does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The node it was asked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The terminal reason, or `pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `question` or `approval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `decidedBy.kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

impl HistoryFilter {
    /// The keys a filter may have, as on the wire.
    pub const KEYS: [&'static str; 9] = [
        "correlationId",
        "since",
        "until",
        "project",
        "agent",
        "node",
        "reason",
        "kind",
        "decidedBy",
    ];

    pub fn is_empty(&self) -> bool {
        *self == HistoryFilter::default()
    }

    /// The field a wire key names.
    pub fn slot(&mut self, key: &str) -> Option<&mut Option<String>> {
        Some(match key {
            "correlationId" => &mut self.correlation_id,
            "since" => &mut self.since,
            "until" => &mut self.until,
            "project" => &mut self.project,
            "agent" => &mut self.agent,
            "node" => &mut self.node,
            "reason" => &mut self.reason,
            "kind" => &mut self.kind,
            "decidedBy" => &mut self.decided_by,
            _ => return None,
        })
    }
}

/// A `history` query, its fields checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryQueryFrame {
    pub filter: HistoryFilter,
    /// Records per answer, 1 to [`MAX_HISTORY_LIMIT`] (`None`: [`DEFAULT_HISTORY_LIMIT`]).
    pub limit: Option<u32>,
    /// The previous answer's `cursor`: this answer continues after it.
    pub cursor: Option<String>,
}
