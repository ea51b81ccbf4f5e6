//! Frames a client sends the daemon, for clients built on this crate (the daemon reads them
//! as `Inbound`).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{HistoryFilter, NoUiPolicy, RequestContext, SubscribeFilter, ToolOutcome};

/// Frames a client sends.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ClientFrame<'a> {
    Hello {
        protocol: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<&'a str>,
        /// The kind of UI this is (`tui`, `web`, `notify`, …), recorded in `decidedBy.via`.
        #[serde(skip_serializing_if = "Option::is_none")]
        via: Option<&'a str>,
    },
    Ping {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    Stats,
    Subscribe {
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<&'a str>,
        /// `None` (or an empty filter) shows the UI everything it may see.
        #[serde(skip_serializing_if = "filter_is_empty")]
        filter: Option<&'a SubscribeFilter>,
        /// The kind of UI this is, recorded in `decidedBy.via`.
        #[serde(skip_serializing_if = "Option::is_none")]
        via: Option<&'a str>,
    },
    Watch {
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<&'a str>,
    },
    #[serde(rename_all = "camelCase")]
    AskUserRequest {
        correlation_id: &'a str,
        questions: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        no_ui: Option<NoUiPolicy>,
        #[serde(skip_serializing_if = "context_is_empty")]
        context: Option<&'a RequestContext>,
    },
    #[serde(rename_all = "camelCase")]
    AskUserCancel {
        correlation_id: &'a str,
        /// `answered-elsewhere`, or absent (`withdrawn`).
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        via: Option<&'a str>,
    },
    #[serde(rename_all = "camelCase")]
    AskUserResponse {
        correlation_id: &'a str,
        answers: &'a BTreeMap<usize, String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
        /// Who answered (a chat platform's user), recorded in `decidedBy.user`.
        #[serde(skip_serializing_if = "Option::is_none")]
        user: Option<&'a str>,
    },
    #[serde(rename_all = "camelCase")]
    ToolConfirmationRequest {
        correlation_id: &'a str,
        tool_call: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        server_name: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_annotations: Option<&'a Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<&'a Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcomes: Option<&'a [ToolOutcome]>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        no_ui: Option<NoUiPolicy>,
        #[serde(skip_serializing_if = "context_is_empty")]
        context: Option<&'a RequestContext>,
    },
    #[serde(rename_all = "camelCase")]
    ToolConfirmationCancel {
        correlation_id: &'a str,
        /// `answered-elsewhere`, or absent (`withdrawn`).
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        via: Option<&'a str>,
    },
    /// A decision (`confirmed` and `outcome`), or `dismissed: true` with neither.
    #[serde(rename_all = "camelCase")]
    ToolConfirmationResponse {
        correlation_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<ToolOutcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        payload: Option<&'a serde_json::Map<String, Value>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        dismissed: bool,
        /// Who decided (a chat platform's user), recorded in `decidedBy.user`.
        #[serde(skip_serializing_if = "Option::is_none")]
        user: Option<&'a str>,
    },
    /// A notifier's delivery report (`askbus notify`).
    #[serde(rename_all = "camelCase")]
    NotifyReport {
        sink: &'a str,
        result: super::NotifyResult,
        correlation_ids: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
    },
    /// A query of the store's records; answered with one `history` frame.
    History {
        #[serde(skip_serializing_if = "history_filter_is_empty")]
        filter: &'a HistoryFilter,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cursor: Option<&'a str>,
    },
}

fn filter_is_empty(f: &Option<&SubscribeFilter>) -> bool {
    f.is_none_or(|f| f.is_empty())
}

fn context_is_empty(c: &Option<&RequestContext>) -> bool {
    c.is_none_or(|c| c.is_empty())
}

fn history_filter_is_empty(f: &&HistoryFilter) -> bool {
    f.is_empty()
}
