//! The approval frames (`tool-confirmation-*`): Gemini CLI core's tool confirmations carried
//! with the envelope of questions, in both directions. The parsers in `parse` read them; what
//! the tool call and its details must look like is `crate::approvals`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{NoUiPolicy, Outcome, ProducerInfo, RequestContext, TimeoutMs, WithdrawReason};

/// Longest `message` a UI may type for the agent, in characters.
pub const MAX_APPROVAL_MESSAGE_CHARS: usize = 4096;

/// `ToolConfirmationOutcome` of the reference (`dist/src/tools/tools.d.ts`), in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    ProceedOnce,
    ProceedAlways,
    ProceedAlwaysAndSave,
    ProceedAlwaysServer,
    ProceedAlwaysTool,
    ModifyWithEditor,
    Cancel,
}

impl ToolOutcome {
    pub const ALL: [ToolOutcome; 7] = [
        ToolOutcome::ProceedOnce,
        ToolOutcome::ProceedAlways,
        ToolOutcome::ProceedAlwaysAndSave,
        ToolOutcome::ProceedAlwaysServer,
        ToolOutcome::ProceedAlwaysTool,
        ToolOutcome::ModifyWithEditor,
        ToolOutcome::Cancel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::ProceedOnce => "proceed_once",
            ToolOutcome::ProceedAlways => "proceed_always",
            ToolOutcome::ProceedAlwaysAndSave => "proceed_always_and_save",
            ToolOutcome::ProceedAlwaysServer => "proceed_always_server",
            ToolOutcome::ProceedAlwaysTool => "proceed_always_tool",
            ToolOutcome::ModifyWithEditor => "modify_with_editor",
            ToolOutcome::Cancel => "cancel",
        }
    }

    pub fn parse(s: &str) -> Option<ToolOutcome> {
        ToolOutcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether choosing it approves the call: everything but `cancel`.
    pub fn confirms(self) -> bool {
        self != ToolOutcome::Cancel
    }

    /// What a UI's button says.
    pub fn label(self) -> &'static str {
        match self {
            ToolOutcome::ProceedOnce => "Allow once",
            ToolOutcome::ProceedAlways => "Allow always",
            ToolOutcome::ProceedAlwaysAndSave => "Allow always and save",
            ToolOutcome::ProceedAlwaysServer => "Allow every tool of this server",
            ToolOutcome::ProceedAlwaysTool => "Allow this tool always",
            ToolOutcome::ModifyWithEditor => "Modify",
            ToolOutcome::Cancel => "Deny",
        }
    }

    /// The list every approval offers at least, whatever its producer listed.
    pub const MINIMAL: [ToolOutcome; 2] = [ToolOutcome::ProceedOnce, ToolOutcome::Cancel];

    /// The one-line list of every outcome, for error messages.
    pub fn names() -> String {
        ToolOutcome::ALL.map(ToolOutcome::as_str).join(", ")
    }
}

impl std::fmt::Display for ToolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `tool-confirmation-request` whose envelope (correlationId, timeoutMs, noUi) is valid;
/// `approvals::check` reads the rest of the frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConfirmationRequest {
    pub correlation_id: String,
    pub timeout_ms: Option<TimeoutMs>,
    pub no_ui: Option<NoUiPolicy>,
    pub context: Option<RequestContext>,
    /// The whole frame as sent (key order kept).
    pub frame: Map<String, Value>,
}

/// What a UI decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Closed without deciding: never an approval.
    Dismissed,
    Decided {
        /// `outcome.confirms()`: the two agree, or the frame was refused.
        outcome: ToolOutcome,
        message: Option<String>,
        payload: Option<Map<String, Value>>,
    },
}

impl Decision {
    /// "Allow once": `proceed_once`, which every approval offers.
    pub fn allow_once() -> Decision {
        Decision::allow(ToolOutcome::ProceedOnce)
    }

    /// Approve with `outcome` (one the request's `outcomes` lists; `cancel` denies).
    pub fn allow(outcome: ToolOutcome) -> Decision {
        Decision::Decided {
            outcome,
            message: None,
            payload: None,
        }
    }

    /// "Deny", with the reason the agent is told, if the person gave one.
    pub fn deny(reason: Option<String>) -> Decision {
        Decision::Decided {
            outcome: ToolOutcome::Cancel,
            message: reason.filter(|r| !r.is_empty()),
            payload: None,
        }
    }

    /// `modify_with_editor` with the edited text (`payload.newContent`).
    pub fn modify(new_content: String) -> Decision {
        let mut payload = Map::new();
        payload.insert("newContent".into(), Value::String(new_content));
        Decision::Decided {
            outcome: ToolOutcome::ModifyWithEditor,
            message: None,
            payload: Some(payload),
        }
    }

    /// Whether it approves the call (never for a dismissal).
    pub fn confirms(&self) -> bool {
        matches!(self, Decision::Decided { outcome, .. } if outcome.confirms())
    }

    /// The `tool-confirmation-response` a UI sends for it.
    pub fn frame<'a>(&'a self, correlation_id: &'a str) -> super::ClientFrame<'a> {
        match self {
            Decision::Dismissed => super::ClientFrame::ToolConfirmationResponse {
                correlation_id,
                confirmed: None,
                outcome: None,
                message: None,
                payload: None,
                dismissed: true,
                user: None,
            },
            Decision::Decided {
                outcome,
                message,
                payload,
            } => super::ClientFrame::ToolConfirmationResponse {
                correlation_id,
                confirmed: Some(outcome.confirms()),
                outcome: Some(*outcome),
                message: message.as_deref(),
                payload: payload.as_ref(),
                dismissed: false,
                user: None,
            },
        }
    }
}

/// A UI's `tool-confirmation-response` with its shape checked; whether the request offers the
/// outcome is the broker's.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConfirmationResponse {
    pub correlation_id: String,
    pub decision: Decision,
    /// Who decided, as the UI claims (a chat platform's user id and name): `decidedBy.user`.
    pub user: Option<String>,
}

/// A pending approval as a UI receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiApproval {
    pub correlation_id: String,
    pub tool_call: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_annotations: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// What the UI may offer, in the reference's order.
    pub outcomes: Vec<ToolOutcome>,
    /// Milliseconds left before the request times out, as of sending.
    pub timeout_ms: u64,
    pub producer: ProducerInfo,
    /// The producer's `context`, as it sent it (known fields only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<RequestContext>,
    /// Federation: the node the approval was asked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The daemon's encoding of a [`UiApproval`]: the tool call, annotations and details stay the
/// JSON text the daemon keeps them as (written as serde_json writes them), so a broadcast or a
/// replay never re-serializes them. Its encoder is `encode_fast`'s (feature `fast`).
#[cfg(feature = "fast")]
#[doc(hidden)]
#[derive(Debug)]
pub struct UiApprovalRef<'a> {
    pub correlation_id: &'a str,
    /// JSON text, copied in as it is.
    pub tool_call: &'a str,
    pub server_name: Option<&'a str>,
    /// JSON text, copied in as it is.
    pub tool_annotations: Option<&'a str>,
    pub subagent: Option<&'a str>,
    /// JSON text, copied in as it is.
    pub details: Option<&'a str>,
    pub outcomes: &'a [ToolOutcome],
    pub timeout_ms: u64,
    pub producer: &'a ProducerInfo,
    pub context: Option<&'a RequestContext>,
    /// Federation: the origin node.
    pub node: Option<&'a str>,
}

/// The one terminal answer a producer gets for an accepted approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResponse {
    pub correlation_id: String,
    /// True only for reason `answered` with an approving outcome.
    pub confirmed: bool,
    pub outcome: ToolOutcome,
    pub reason: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
}

/// The server frames of approvals, flattened into `ServerFrame` by its variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAck {
    pub correlation_id: String,
    /// `answered` or `dismissed`.
    pub reason: Outcome,
    pub confirmed: bool,
    pub outcome: ToolOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalWithdrawn {
    pub correlation_id: String,
    pub reason: WithdrawReason,
    /// Federation: the node the approval was asked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Federation, reason `answered`: the UI that decided, and its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<super::UiInfo>,
}
