//! What a producer asks a person to approve ([`Confirm`], a `tool-confirmation-request`) and
//! what it gets back ([`Confirmation`]): a decision that is an approval only when a person
//! approved, whatever else went wrong, so an agent can act on `confirmed` alone.

use serde_json::{Map, Value};

use super::ClientError;
use crate::protocol::{
    ApprovalResponse, ClientFrame, ErrorFrame, NoUiPolicy, Outcome, RequestContext, ToolOutcome,
};

/// An agent's tool call to approve: the fields of Gemini CLI core's
/// `tool-confirmation-request` (see `proto/PROTOCOL.md`, "Approval frames").
#[derive(Debug, Clone, Default)]
pub struct Confirm {
    /// The reference's `FunctionCall`: `{"name": …, "args": {…}}` (`name` required).
    pub tool_call: Value,
    /// The MCP server the tool belongs to.
    pub server_name: Option<String>,
    pub tool_annotations: Option<Value>,
    pub subagent: Option<String>,
    /// `SerializableConfirmationDetails` (`{"type": "exec", "title": …, "command": …}`): what
    /// the person is shown.
    pub details: Option<Value>,
    /// What the agent can act on (`None`: allow once or deny); `proceed_once` and `cancel`
    /// are always offered.
    pub outcomes: Option<Vec<ToolOutcome>>,
    /// Chosen by the client when `None`.
    pub correlation_id: Option<String>,
    pub timeout_ms: Option<u64>,
    pub no_ui: Option<NoUiPolicy>,
    /// Who is asking, about what.
    pub context: Option<RequestContext>,
}

impl Confirm {
    /// A tool call with its name and arguments, nothing else.
    pub fn tool(name: &str, args: Value) -> Confirm {
        Confirm {
            tool_call: serde_json::json!({"name": name, "args": args}),
            ..Confirm::default()
        }
    }

    /// The `details` of an `exec` (shell command) confirmation, as Gemini CLI sends them.
    pub fn exec(command: &str) -> Confirm {
        let root = command.split_whitespace().next().unwrap_or(command);
        Confirm {
            details: Some(serde_json::json!({
                "type": "exec", "title": "Confirm Shell Command", "command": command,
                "rootCommand": root, "rootCommands": [root],
            })),
            ..Confirm::tool("run_shell_command", serde_json::json!({"command": command}))
        }
    }

    pub(super) fn frame<'a>(
        &'a self,
        correlation_id: &'a str,
        timeout_ms: Option<u64>,
        no_ui: Option<NoUiPolicy>,
    ) -> ClientFrame<'a> {
        ClientFrame::ToolConfirmationRequest {
            correlation_id,
            tool_call: &self.tool_call,
            server_name: self.server_name.as_deref(),
            tool_annotations: self.tool_annotations.as_ref(),
            subagent: self.subagent.as_deref(),
            details: self.details.as_ref(),
            outcomes: self.outcomes.as_deref(),
            timeout_ms,
            no_ui,
            context: self.context.as_ref(),
        }
    }
}

/// Why a confirmation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfirmationReason {
    /// The daemon's terminal frame: `answered` (a person decided, `confirmed` says how),
    /// `dismissed`, `timeout`, `no-ui`, `withdrawn` or `shutdown`.
    Daemon(Outcome),
    /// The daemon refused the request (e.g. `invalid-request`, `forbidden`,
    /// `too-many-pending`).
    Refused(ErrorFrame),
    /// No daemon held the request to its end: the connection was lost and no daemon took
    /// the request back before its deadline. The text says what failed.
    DaemonLost(String),
}

/// The one answer to [`super::Producer::confirm`].
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub correlation_id: String,
    /// True only when a person chose an approving outcome.
    pub confirmed: bool,
    /// The person's choice when answered; `cancel` for every other end.
    pub outcome: ToolOutcome,
    pub reason: ConfirmationReason,
    /// For the agent: the person's text (typically why they denied), or why the call was
    /// not approved when nobody decided.
    pub message: Option<String>,
    /// The person's `ToolConfirmationPayload` (`{"newContent": …}` with
    /// `modify_with_editor`).
    pub payload: Option<Map<String, Value>>,
}

impl Confirmation {
    pub(super) fn from_response(r: ApprovalResponse) -> Confirmation {
        // The daemon promises `confirmed` only for `answered`; a client that trusted a
        // daemon saying otherwise would not fail closed.
        let confirmed = r.confirmed && r.reason == Outcome::Answered && r.outcome.confirms();
        Confirmation {
            correlation_id: r.correlation_id,
            confirmed,
            outcome: if confirmed {
                r.outcome
            } else {
                ToolOutcome::Cancel
            },
            reason: ConfirmationReason::Daemon(r.reason),
            message: r.message,
            payload: if confirmed { r.payload } else { None },
        }
    }

    pub(super) fn failed(correlation_id: String, error: ClientError) -> Confirmation {
        let (reason, message) = match error {
            ClientError::Rejected(e) => {
                let m = format!(
                    "askbusd refused the confirmation request ({}: {}), so the tool call was not approved.",
                    e.code, e.message
                );
                (ConfirmationReason::Refused(e), m)
            }
            other => {
                let why = other.to_string();
                let m = format!("{why}, so the tool call was not approved.");
                (ConfirmationReason::DaemonLost(why), m)
            }
        };
        Confirmation {
            correlation_id,
            confirmed: false,
            outcome: ToolOutcome::Cancel,
            reason,
            message: Some(message),
            payload: None,
        }
    }

    /// Whether a person decided (either way), rather than the request ending undecided.
    pub fn decided(&self) -> bool {
        self.reason == ConfirmationReason::Daemon(Outcome::Answered)
    }
}
