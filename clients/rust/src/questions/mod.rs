//! ask_user semantics: validation, normalization and the tool result, identical to the
//! reference (`AskUserTool` in `@google/gemini-cli-core` 0.61.0). Pure functions over
//! serde_json values; the broker calls them, nothing here does I/O.
//!
//! This module owns every string the model or a UI sees about a question's shape or its
//! outcome: the reference's validation errors, its normalized questions, its `ToolResult`s,
//! and the daemon's own outcome wording ([`daemon_text`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::protocol::{AskUserData, RequestQuestions, ResultData};

#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod fast;
mod js;
mod reference;
mod schema;

pub use js::{js_trim, js_utf16_len};
#[cfg(feature = "fast")]
use reference::unescape;
pub use reference::{normalize, validate};

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

    /// The type named by a question's `type` string, if it is one the schema allows.
    pub fn parse(s: &str) -> Option<QuestionType> {
        match s {
            "choice" => Some(QuestionType::Choice),
            "text" => Some(QuestionType::Text),
            "yesno" => Some(QuestionType::YesNo),
            _ => None,
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

impl DaemonOutcome {
    /// The `data.ask_user.reason` value.
    pub fn reason(self) -> &'static str {
        match self {
            DaemonOutcome::Timeout => "timeout",
            DaemonOutcome::NoUi => "no-ui",
            DaemonOutcome::Withdrawn => "withdrawn",
            DaemonOutcome::Shutdown => "shutdown",
        }
    }
}

/// What the model is handed: the reference's `ToolResult`, as the wire carries it.
pub type ToolResult = crate::protocol::ResultPayload;

/// The reference's own wording for a dismissed dialog.
pub const DISMISSED_LLM_CONTENT: &str = "User dismissed ask_user dialog without answering.";
pub const DISMISSED_RETURN_DISPLAY: &str = "User dismissed dialog";
/// The reference's `returnDisplay` when the user submitted no answer at all.
pub const EMPTY_SUBMISSION_RETURN_DISPLAY: &str = "User submitted without answering questions.";

/// The daemon's wording for outcomes the reference never produces (the protocol documents
/// these verbatim, so they live here and only here). Each entry is
/// `(llmContent, returnDisplay)`; in the timeout pair `{T}` stands for the timeout in seconds
/// written without trailing zeros (`600`, `1.5`, `0.001`).
///
/// The llmContent is addressed to the model (so it can carry on without the answer); the
/// returnDisplay is a short line for the human-facing transcript.
pub mod daemon_text {
    /// `{S}` is `seconds`, or `second` when `{T}` is exactly 1.
    pub const TIMEOUT_LLM_CONTENT: &str = "User did not answer the ask_user dialog within {T} {S}.";
    pub const TIMEOUT_RETURN_DISPLAY: &str = "No answer: the question timed out after {T} s";
    pub const NO_UI_LLM_CONTENT: &str =
        "No user interface is connected to answer ask_user questions; continue without asking.";
    pub const NO_UI_RETURN_DISPLAY: &str = "No answer: no user interface is connected";
    pub const WITHDRAWN_LLM_CONTENT: &str =
        "The ask_user question was withdrawn before the user answered.";
    pub const WITHDRAWN_RETURN_DISPLAY: &str = "Question withdrawn";
    pub const SHUTDOWN_LLM_CONTENT: &str =
        "The askbus daemon shut down before the user answered the ask_user dialog.";
    pub const SHUTDOWN_RETURN_DISPLAY: &str = "No answer: the askbus daemon shut down";
}

/// Validated questions as the broker keeps them: the normalized JSON UIs receive, and the
/// per-question facts results are built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// JSON text, written by the daemon itself.
    pub questions: Box<str>,
    pub meta: Vec<QuestionMeta>,
}

/// Validates and normalizes a request's questions, as they arrived in a parsed frame: the
/// reference ([`normalize`]) of the request's `params`. (The daemon's door, askbusd's
/// `intake`, tries the fast path of the feature `fast` first, which by contract gives the same.)
pub fn check(questions: RequestQuestions) -> Result<Normalized, String> {
    normalize(&questions.into_params())
}

/// The per-question facts of an already validated and normalized questions array.
///
/// Given something `validate` would reject, it still answers rather than panicking: a
/// missing or unknown `type` reads as `choice`, the schema's declared default.
pub fn meta(normalized: &[Value]) -> Vec<QuestionMeta> {
    normalized
        .iter()
        .map(|q| QuestionMeta {
            header: q.get("header").and_then(Value::as_str).map(str::to_owned),
            qtype: q
                .get("type")
                .and_then(Value::as_str)
                .and_then(QuestionType::parse)
                .unwrap_or(QuestionType::Choice),
        })
        .collect()
}

/// The `question_types` list every result's `data.ask_user` carries.
pub fn question_types(meta: &[QuestionMeta]) -> Vec<&'static str> {
    meta.iter().map(|m| m.qtype.as_str()).collect()
}

/// The result of an answered dialog; `answers` keyed by question index.
/// An upper bound on the bytes `answered_result` would produce, computed without building it.
/// The reference indents every continuation line of an answer by its header's width, so a
/// long header times many short lines grows without limit; the broker refuses answers past a
/// cap instead of building them.
pub fn answered_result_size_bound(
    meta: &[QuestionMeta],
    answers: &BTreeMap<usize, String>,
) -> usize {
    answers
        .iter()
        .map(|(&i, answer)| {
            let header = meta
                .get(i)
                .and_then(|m| m.header.as_deref())
                .map_or(8, str::len);
            // "  <header> → " is at most header + 7 bytes and as many UTF-16 units.
            let prefix = header + 7;
            let lines = answer.bytes().filter(|&b| b == b'\n').count() + 1;
            // llmContent escapes each byte into at most 6 (`\u00XX`); returnDisplay repeats it
            // with one indent per line.
            6 * answer.len() + answer.len() + lines * (prefix + 1) + 16
        })
        .sum::<usize>()
        + 256
}

pub fn answered_result(meta: &[QuestionMeta], answers: &BTreeMap<usize, String>) -> ToolResult {
    let return_display = if answers.is_empty() {
        EMPTY_SUBMISSION_RETURN_DISPLAY.to_owned()
    } else {
        let mut out = String::from("**User answered:**");
        for (&i, answer) in answers {
            // The reference falls back to `Q<index>` (0-based, the answers key itself)
            // both for a missing header and for an index past the last question.
            let fallback;
            let category = match meta.get(i).and_then(|m| m.header.as_deref()) {
                Some(header) => header,
                None => {
                    fallback = format!("Q{i}");
                    &fallback
                }
            };
            let start = out.len() + 1;
            out.push_str("\n  ");
            out.push_str(category);
            out.push_str(" → ");
            // JS `prefix.length` counts UTF-16 code units, not chars or bytes.
            let indent = js_utf16_len(&out[start..]);
            for (n, line) in answer.split('\n').enumerate() {
                if n > 0 {
                    out.push('\n');
                    out.extend(std::iter::repeat_n(' ', indent));
                }
                out.push_str(line);
            }
        }
        out
    };
    ToolResult {
        llm_content: answers_json(answers),
        return_display,
        data: ResultData {
            ask_user: AskUserData {
                question_types: question_types_data(meta),
                dismissed: false,
                empty_submission: Some(answers.is_empty()),
                answer_count: Some(answers.len() as u64),
                reason: None,
            },
        },
    }
}

fn question_types_data(meta: &[QuestionMeta]) -> Vec<std::borrow::Cow<'static, str>> {
    meta.iter().map(|m| m.qtype.as_str().into()).collect()
}

/// `JSON.stringify({answers})`. Written out by hand so the key order is the one JS gives
/// integer keys (ascending, which the BTreeMap already is) whatever serde_json's map
/// features; serde_json's string escaping matches JSON.stringify's for any Rust string
/// (short escapes, lowercase `\u00xx` for other C0 controls, nothing else escaped).
fn answers_json(answers: &BTreeMap<usize, String>) -> String {
    let mut s = Vec::with_capacity(16 + answers.values().map(|v| v.len() + 8).sum::<usize>());
    s.extend_from_slice(b"{\"answers\":{");
    for (n, (k, v)) in answers.iter().enumerate() {
        if n > 0 {
            s.push(b',');
        }
        s.push(b'"');
        s.extend_from_slice(k.to_string().as_bytes());
        s.extend_from_slice(b"\":");
        serde_json::to_writer(&mut s, v).expect("a string always serializes");
    }
    s.extend_from_slice(b"}}");
    String::from_utf8(s).expect("serde_json writes UTF-8")
}

/// The `data` of every result without answers: dismissed by the user (no reason) or ended by
/// the daemon (its reason).
fn unanswered_data(meta: &[QuestionMeta], reason: Option<&'static str>) -> ResultData {
    ResultData {
        ask_user: AskUserData {
            question_types: question_types_data(meta),
            dismissed: true,
            empty_submission: None,
            answer_count: None,
            reason: reason.map(Into::into),
        },
    }
}

/// The result when the user dismissed the dialog.
pub fn dismissed_result(meta: &[QuestionMeta]) -> ToolResult {
    ToolResult {
        llm_content: DISMISSED_LLM_CONTENT.to_owned(),
        return_display: DISMISSED_RETURN_DISPLAY.to_owned(),
        data: unanswered_data(meta, None),
    }
}

/// The result for an outcome the daemon decided (no user answer).
pub fn daemon_result(meta: &[QuestionMeta], outcome: DaemonOutcome, timeout_ms: u64) -> ToolResult {
    use daemon_text::*;
    let (llm, display) = match outcome {
        DaemonOutcome::Timeout => {
            let t = format_seconds(timeout_ms);
            (
                TIMEOUT_LLM_CONTENT
                    .replace("{T}", &t)
                    .replace("{S}", if t == "1" { "second" } else { "seconds" }),
                TIMEOUT_RETURN_DISPLAY.replace("{T}", &t),
            )
        }
        DaemonOutcome::NoUi => (NO_UI_LLM_CONTENT.into(), NO_UI_RETURN_DISPLAY.into()),
        DaemonOutcome::Withdrawn => (
            WITHDRAWN_LLM_CONTENT.into(),
            WITHDRAWN_RETURN_DISPLAY.into(),
        ),
        DaemonOutcome::Shutdown => (SHUTDOWN_LLM_CONTENT.into(), SHUTDOWN_RETURN_DISPLAY.into()),
    };
    ToolResult {
        llm_content: llm,
        return_display: display,
        data: unanswered_data(meta, Some(outcome.reason())),
    }
}

/// Milliseconds as seconds with no trailing zeros, in integer arithmetic so no float
/// rounding can creep into the text.
pub fn format_seconds(ms: u64) -> String {
    let (secs, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        secs.to_string()
    } else {
        let f = format!("{frac:03}");
        format!("{secs}.{}", f.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests;
