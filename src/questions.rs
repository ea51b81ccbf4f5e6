//! ask_user semantics: validation, normalization and the tool result, identical to the
//! reference (`AskUserTool` in `@google/gemini-cli-core` 0.61.0). Pure functions over
//! serde_json values; the broker calls them, nothing here does I/O.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The three question types the reference accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionType {
    Choice,
    Text,
    YesNo,
}

impl QuestionType {
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionType::Choice => "choice",
            QuestionType::Text => "text",
            QuestionType::YesNo => "yesno",
        }
    }
}

/// What the broker keeps of each normalized question to build results later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionMeta {
    /// `None` only when the question has no `header` key; `""` stays `Some("")`.
    pub header: Option<String>,
    pub qtype: QuestionType,
}

/// The daemon's own terminal outcomes, which the reference tool never produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonOutcome {
    Timeout,
    NoUi,
    Withdrawn,
    Shutdown,
}

/// What the model is handed: the reference's `ToolResult` as the wire carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub llm_content: String,
    pub return_display: String,
    pub data: Value,
}

/// Validates `params` (an object holding `questions`) as the reference's `build(params)` does
/// and returns the normalized `questions` array, or the reference's exact error message.
pub fn validate(_params: &Value) -> Result<Vec<Value>, String> {
    todo!("issue 3")
}

/// The per-question facts of an already validated and normalized questions array.
pub fn meta(_normalized: &[Value]) -> Vec<QuestionMeta> {
    todo!("issue 3")
}

/// The result of an answered dialog; `answers` keyed by question index.
pub fn answered_result(_meta: &[QuestionMeta], _answers: &BTreeMap<usize, String>) -> ToolResult {
    todo!("issue 3")
}

/// The result when the user dismissed the dialog.
pub fn dismissed_result(_meta: &[QuestionMeta]) -> ToolResult {
    todo!("issue 3")
}

/// The result for an outcome the daemon decided (no user answer).
pub fn daemon_result(
    _meta: &[QuestionMeta],
    _outcome: DaemonOutcome,
    _timeout_ms: u64,
) -> ToolResult {
    todo!("issue 3")
}
