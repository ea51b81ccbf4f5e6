//! The fast parser of the frames every question and every approval costs (`ask-user-request`
//! and `tool-confirmation-request` from producers, `ask-user-response` and
//! `tool-confirmation-response` from UIs): serde reads them straight into their fields,
//! borrowing from the payload, instead of building a `Value` tree and walking it.
//!
//! It is an optimisation of [`super::reference`], which decides. It accepts a frame only when
//! every field it reads is present with the plain shape the reference would accept, and then
//! yields exactly what the reference would; anything else (a wrong type, a duplicate key, a
//! null, an escaped `type`, a value the reference rejects) makes it give up, and the reference
//! decides, with its own error message. So no error wording lives here, and the two cannot
//! disagree on a frame that is accepted (debug builds of the daemon's door assert it on every
//! frame). An approval's
//! tool call and details are handed on as text for `approvals::fast`, which checks them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

mod envelope;
mod guards;

pub(crate) use envelope::Str;
use envelope::{Answers, Envelope};
use guards::{has_surrogate_escape, may_hold_huge_number, may_nest_too_deep};

use crate::protocol::frames::{
    AskUserRequest, AskUserResponse, Decision, Inbound, NoUiPolicy, RequestContext,
    RequestQuestions, TimeoutMs, ToolConfirmationResponse, ToolOutcome, MAX_APPROVAL_MESSAGE_CHARS,
};
use crate::protocol::MAX_CORRELATION_ID_CHARS;

/// A request's envelope (an `ask-user-request` but for its questions, a
/// `tool-confirmation-request` but for its tool call): what [`parse_fast`] hands back beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestHead {
    pub correlation_id: String,
    pub timeout_ms: Option<TimeoutMs>,
    pub no_ui: Option<NoUiPolicy>,
    pub context: Option<RequestContext>,
}

/// The envelope's request fields, if the reference would accept them as they are.
fn request_head<Q>(env: &Envelope<'_, Q>) -> Option<RequestHead> {
    let id = &env.correlation_id;
    if id.is_empty() || id.chars().count() > MAX_CORRELATION_ID_CHARS {
        return None;
    }
    let timeout_ms = match env.timeout_ms {
        None => None,
        Some(0) => return None,
        Some(ms) => Some(TimeoutMs::Ms(ms)),
    };
    let no_ui = match env.no_ui {
        None => None,
        Some(s) => Some(NoUiPolicy::parse(s)?),
    };
    let context = match &env.context {
        None => None,
        Some(context) => context.checked()?,
    };
    Some(RequestHead {
        correlation_id: id.clone().into_owned(),
        timeout_ms,
        no_ui,
        context,
    })
}

/// What [`parse_fast`] read.
#[derive(Debug)]
pub enum FastFrame<'a, Q> {
    /// An `ask-user-request`, its questions read as the caller's `Q`.
    Request(RequestHead, Q),
    /// A `tool-confirmation-request`, its tool call and details as sent, for
    /// `approvals::fast` to check.
    Approval(RequestHead, ApprovalFields<'a>),
    /// An `ask-user-response` or a `tool-confirmation-response`.
    Other(Inbound),
}

/// The fields of a `tool-confirmation-request` that `approvals::check` reads, each the JSON
/// text the producer sent (`None` when absent; a JSON `null` is the text `null`).
#[derive(Debug, Clone, Copy)]
pub struct ApprovalFields<'a> {
    pub tool_call: Option<&'a RawValue>,
    pub server_name: Option<&'a RawValue>,
    pub tool_annotations: Option<&'a RawValue>,
    pub subagent: Option<&'a RawValue>,
    pub details: Option<&'a RawValue>,
    pub outcomes: Option<&'a RawValue>,
}

/// The frames every question and approval costs, fast: an `ask-user-request` with its
/// `questions` read straight into the caller's `Q` (which may borrow from the payload), a
/// `tool-confirmation-request` with its fields as text, or either response; the requests and
/// responses [`parse`] accepts, provided `Q` reads the questions (approvals are left to
/// `approvals::fast`). `None` leaves the frame to [`super::parse_inbound`].
pub fn parse_fast<'a, Q: Deserialize<'a>>(payload: &'a [u8]) -> Option<FastFrame<'a, Q>> {
    // A derived struct also reads a JSON array (its fields in order), which the reference
    // refuses as not an object: only objects take this path.
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    // Questions kept raw (and skipped fields) are not unescaped here, so a lone surrogate in
    // them would pass where the reference refuses the frame as invalid JSON: a frame with any
    // surrogate escape is left to the reference.
    // Skipped fields are not checked for UTF-8 either (found by fuzzing, as the surrogates).
    if has_surrogate_escape(payload) {
        return None;
    }
    // Checked whole once, so serde reads it as text and does not check each string again.
    let text = std::str::from_utf8(payload).ok()?;
    let env: Envelope<Q> = serde_json::from_str(text).ok()?;
    match env.ty {
        "ask-user-request" => {
            let head = request_head(&env)?;
            Some(FastFrame::Request(head, env.questions?))
        }
        "tool-confirmation-request" => {
            let head = request_head(&env)?;
            let fields = ApprovalFields {
                tool_call: env.tool_call,
                server_name: env.server_name,
                tool_annotations: env.tool_annotations,
                subagent: env.subagent,
                details: env.details,
                outcomes: env.outcomes,
            };
            Some(FastFrame::Approval(head, fields))
        }
        _ => response(env).map(FastFrame::Other),
    }
}

/// The frame, if it is an `ask-user-request`, `ask-user-response` or
/// `tool-confirmation-response` the reference would accept as it is; `None` leaves the frame
/// (and every `tool-confirmation-request`, whose reference form is its whole `Value`) to the
/// reference.
pub fn parse(payload: &[u8]) -> Option<Inbound> {
    match parse_fast::<&RawValue>(payload)? {
        // The questions are kept as text, unchecked for what the reference refuses as invalid
        // JSON (a number past an f64, nesting past the depth limit; found by fuzzing, when
        // reading them again then panicked): questions that may hold either are left to it.
        FastFrame::Request(_, questions)
            if may_hold_huge_number(questions.get().as_bytes())
                || may_nest_too_deep(questions.get().as_bytes()) =>
        {
            None
        }
        FastFrame::Request(head, questions) => Some(Inbound::AskUserRequest(AskUserRequest {
            correlation_id: head.correlation_id,
            timeout_ms: head.timeout_ms,
            no_ui: head.no_ui,
            context: head.context,
            questions: RequestQuestions::Raw(questions.to_owned()),
        })),
        FastFrame::Approval(..) => None,
        FastFrame::Other(frame) => Some(frame),
    }
}

/// The envelope as an `ask-user-response` or a `tool-confirmation-response`, if it is one the
/// reference accepts as it is.
fn response<Q>(env: Envelope<'_, Q>) -> Option<Inbound> {
    match env.ty {
        "tool-confirmation-response" => decision(env).map(Inbound::ToolConfirmationResponse),
        "ask-user-response" => {
            let id = env.correlation_id;
            if id.is_empty() || id.chars().count() > MAX_CORRELATION_ID_CHARS {
                return None;
            }
            let cancelled = env.cancelled.unwrap_or(false);
            let answers = match env.answers {
                Some(Answers(answers)) => answers,
                None if cancelled => BTreeMap::new(),
                None => return None,
            };
            Some(Inbound::AskUserResponse(AskUserResponse {
                correlation_id: id.into_owned(),
                answers,
                cancelled,
                user: None,
            }))
        }
        _ => None,
    }
}

/// The envelope as a UI's decision on an approval, if the reference accepts it as it is. A
/// `payload` (only `modify_with_editor` needs one) is left to the reference.
fn decision<Q>(env: Envelope<'_, Q>) -> Option<ToolConfirmationResponse> {
    let id = env.correlation_id;
    if id.is_empty() || id.chars().count() > MAX_CORRELATION_ID_CHARS || env.payload.is_some() {
        return None;
    }
    let correlation_id = id.into_owned();
    if env.dismissed == Some(true) {
        return Some(ToolConfirmationResponse {
            correlation_id,
            decision: Decision::Dismissed,
            user: None,
        });
    }
    let confirmed = env.confirmed?;
    let outcome = match env.outcome {
        None if confirmed => ToolOutcome::ProceedOnce,
        None => ToolOutcome::Cancel,
        Some(s) => ToolOutcome::parse(s)?,
    };
    if outcome.confirms() != confirmed || outcome == ToolOutcome::ModifyWithEditor {
        return None;
    }
    let message = match env.message {
        None => None,
        Some(m) if m.chars().count() <= MAX_APPROVAL_MESSAGE_CHARS => Some(m.into_owned()),
        Some(_) => return None,
    };
    Some(ToolConfirmationResponse {
        correlation_id,
        decision: Decision::Decided {
            outcome,
            message,
            payload: None,
        },
        user: None,
    })
}

#[cfg(test)]
mod tests {
    use super::guards::has_digit_run;
    use super::*;
    use crate::protocol::parse::reference;

    /// Every frame the fast parser accepts must come out exactly as the reference has it.
    fn agrees(frame: &str) -> bool {
        let fast = parse(frame.as_bytes());
        let full = reference::parse(frame.as_bytes());
        if let Some(fast) = &fast {
            assert_eq!(Ok(fast), full.as_ref(), "{frame}");
        }
        fast.is_some()
    }

    #[test]
    fn takes_plain_frames_and_agrees_with_the_full_parser() {
        for frame in [
            r#"{"type":"ask-user-request","correlationId":"a","questions":[{"question":"Q","header":"H","type":"text"}]}"#,
            r#"{"correlationId":"a\u00e9","timeoutMs":5000,"noUi":"reject","type":"ask-user-request","questions":[]}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"0":"x","2":"y\n"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"\u0030":"x","0":"z"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","cancelled":true}"#,
            r#"{"type":"ask-user-response","correlationId":"a","cancelled":false,"answers":{}}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"agent":"g/1","project":"p\u00e9","session":"s","cwd":"/x","title":"T"},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"approvalMode":"autoEdit","interactive":false},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"interactive":true,"approvalMode":"yolo","agent":"c/2"},"questions":[]}"#,
        ] {
            assert!(agrees(frame), "{frame}");
        }
    }

    #[test]
    fn finds_a_surrogate_escape_wherever_it_is() {
        for text in [
            r"\ud800",
            r"\uD83D",
            r"\udfff",
            r"\uDbFf",
            r"x\\ud999",
            r"ab\\\udc00",
            r#""\\\\ud800""#,
        ] {
            assert!(has_surrogate_escape(text.as_bytes()), "{text}");
        }
        for text in [
            "",
            r"\",
            r"\u",
            r"\ud",
            r"\ud7ff",
            r"\ue000",
            r"\uc800",
            r"\n\t\u00e9",
            "ud800",
            r"\\",
            r"x\",
        ] {
            assert!(!has_surrogate_escape(text.as_bytes()), "{text}");
        }
        // Exhaustively, against a four-byte window at every byte, on every string of up to
        // six bytes over the letters that matter.
        let window = |p: &[u8]| {
            p.windows(4).any(|w| {
                w[0] == b'\\'
                    && w[1] == b'u'
                    && matches!(w[2], b'd' | b'D')
                    && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
            })
        };
        let letters = b"\\udD8fFx7";
        let mut text = Vec::new();
        for n in 0..=6u32 {
            for mut k in 0..letters.len().pow(n) {
                text.clear();
                for _ in 0..n {
                    text.push(letters[k % letters.len()]);
                    k /= letters.len();
                }
                assert_eq!(has_surrogate_escape(&text), window(&text), "{text:?}");
            }
        }
    }

    #[test]
    fn leaves_huge_numbers_and_deep_nesting_to_the_reference() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let long = "7".repeat(400);
        for value in [
            deep(200),
            deep(127),
            "1e999".to_owned(),
            "-1E+400".to_owned(),
            "1.5e3".to_owned(),
            long.clone(),
            format!("[{long}]"),
        ] {
            for frame in [
                format!(
                    r#"{{"type":"ask-user-response","correlationId":"a","answers":{{}},"x":{value}}}"#
                ),
                format!(r#"{{"type":"ask-user-request","correlationId":"a","questions":{value}}}"#),
                format!(
                    r#"{{"type":"ask-user-request","correlationId":"a","context":{{"y":{value}}},"questions":[]}}"#
                ),
            ] {
                assert!(parse(frame.as_bytes()).is_none(), "{frame}");
            }
        }
        // What the reference accepts of these, it accepts on its own.
        for value in [deep(100), "1e308".to_owned(), "7".repeat(300)] {
            let frame = format!(
                r#"{{"type":"ask-user-response","correlationId":"a","answers":{{}},"x":{value}}}"#
            );
            assert!(agrees(&frame) || crate::protocol::parse_inbound(frame.as_bytes()).is_ok());
        }
        // Brackets and exponent-like text inside strings cost nothing but the shortcut.
        let many = format!(
            r#"{{"type":"ask-user-response","correlationId":"a","answers":{{"0":"{}"}}}}"#,
            "[{".repeat(100)
        );
        assert!(agrees(&many));
        let escaped =
            r#"{"type":"ask-user-response","correlationId":"a\u00e9\u1E00","answers":{}}"#;
        assert!(agrees(escaped));
        assert!(has_digit_run(
            &b"x"
                .repeat(3)
                .iter()
                .chain(long.as_bytes())
                .copied()
                .collect::<Vec<_>>(),
            309
        ));
        assert!(!has_digit_run("1".repeat(250).as_bytes(), 309));
    }

    #[test]
    fn leaves_everything_unusual_to_the_full_parser() {
        for frame in [
            // Unknown keys (their values would be skipped unchecked).
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"extra":{"x":[1,null]}}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"future":1},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"other":{"y":[null]}},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a"}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"timeoutMs":null}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"timeoutMs":0}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"timeoutMs":5000.0}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"timeoutMs":-1}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"noUi":"never"}"#,
            r#"{"type":"ask-user-request","correlationId":"","questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":7,"questions":[]}"#,
            r#"{"type":"ask-user-request","type":"ask-user-request","correlationId":"a","questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[],"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","questions":[]} x"#,
            r#"{"type":"ask\u002duser-request","correlationId":"a","questions":[]}"#,
            r#"{"type":"ask-user-response","correlationId":"a"}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":null}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"00":"x"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"0":1}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{},"cancelled":null}"#,
            r#"{"type":"ping","correlationId":"a"}"#,
            r#"[]"#,
            r#"["ask-user-request","a",5000,"wait",null,[{"question":"Q","header":"H","type":"text"}]]"#,
            r#"["ask-user-response","a",null,null,null,null,{"0":"x"}]"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":null,"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":[],"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"project":null},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"project":7},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"project":""},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"title":"a\nb"},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"project":"a","project":"b"},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{},"context":{},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"approvalMode":"YOLO"},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"approvalMode":1},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"approvalMode":null},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"interactive":"no"},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"interactive":null},"questions":[]}"#,
            r#"{"type":"ask-user-request","correlationId":"a","context":{"interactive":true,"interactive":false},"questions":[]}"#,
        ] {
            assert!(!agrees(frame), "{frame}");
        }
        let long = format!(
            r#"{{"type":"ask-user-request","correlationId":"{}","questions":[]}}"#,
            "é".repeat(MAX_CORRELATION_ID_CHARS + 1)
        );
        assert!(!agrees(&long));
        let long = format!(
            r#"{{"type":"ask-user-request","correlationId":"a","context":{{"project":"{}"}},"questions":[]}}"#,
            "é".repeat(129)
        );
        assert!(!agrees(&long));
    }
}
