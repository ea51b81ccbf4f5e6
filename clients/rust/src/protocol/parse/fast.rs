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
//! disagree on a frame that is accepted (debug builds assert it on every frame). An approval's
//! tool call and details are handed on as text for `approvals::fast`, which checks them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::protocol::frames::{
    check_context_value, question_index, AskUserRequest, AskUserResponse, Decision, Inbound,
    NoUiPolicy, RequestContext, RequestQuestions, TimeoutMs, ToolConfirmationResponse, ToolOutcome,
    MAX_APPROVAL_MESSAGE_CHARS,
};
use crate::protocol::MAX_CORRELATION_ID_CHARS;

/// The fields of the frames this parser takes. An unknown key, which the reference skips, makes
/// it give up: serde skips a value without checking it as the reference's `Value` does (a
/// number past an f64, nesting past the depth limit; found by fuzzing), and frames from the
/// clients carry none.
/// `Q` is what `questions` is read as: its text, or (for [`parse_request`]) the caller's own
/// fast reading of it.
#[derive(Deserialize)]
#[serde(bound(deserialize = "Q: Deserialize<'de>"), deny_unknown_fields)]
struct Envelope<'a, Q> {
    #[serde(rename = "type", borrow)]
    ty: &'a str,
    #[serde(rename = "correlationId", borrow)]
    correlation_id: Cow<'a, str>,
    #[serde(default, rename = "timeoutMs", deserialize_with = "present")]
    timeout_ms: Option<u64>,
    #[serde(default, rename = "noUi", borrow, deserialize_with = "present")]
    no_ui: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "present")]
    context: Option<Context<'a>>,
    #[serde(default = "absent", deserialize_with = "present")]
    questions: Option<Q>,
    #[serde(default, deserialize_with = "present")]
    answers: Option<Answers>,
    #[serde(default, deserialize_with = "present")]
    cancelled: Option<bool>,
    #[serde(default, rename = "toolCall", borrow, deserialize_with = "present")]
    tool_call: Option<&'a RawValue>,
    #[serde(default, rename = "serverName", borrow, deserialize_with = "present")]
    server_name: Option<&'a RawValue>,
    #[serde(
        default,
        rename = "toolAnnotations",
        borrow,
        deserialize_with = "present"
    )]
    tool_annotations: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    subagent: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    details: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    outcomes: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    confirmed: Option<bool>,
    #[serde(default, borrow, deserialize_with = "present")]
    outcome: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "present")]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    payload: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    dismissed: Option<bool>,
}

/// A field that, when present, must hold a `T` (not `null`): serde's own `Option` would read
/// `null` as absent, where the reference reports it.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

fn absent<Q>() -> Option<Q> {
    None
}

/// `answers`: canonical question indices to strings. The last of duplicate keys wins, as in
/// the reference's map.
struct Answers(BTreeMap<usize, String>);

impl<'de> Deserialize<'de> for Answers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Answers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings keyed by question index")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answers, A::Error> {
                let mut answers = BTreeMap::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let index = question_index(&key)
                        .ok_or_else(|| de::Error::custom("not a question index"))?;
                    answers.insert(index, map.next_value::<String>()?);
                }
                Ok(Answers(answers))
            }
        }
        d.deserialize_map(V)
    }
}

/// A request's `context`: an object (never an array, which a derived struct would take) of
/// the known fields, each a string when present (a `null`, another type, a duplicate key, or
/// an unknown key, whose value serde would skip unchecked, makes the shortcut give up).
#[derive(Default)]
struct Context<'a> {
    agent: Option<Cow<'a, str>>,
    session: Option<Cow<'a, str>>,
    project: Option<Cow<'a, str>>,
    cwd: Option<Cow<'a, str>>,
    title: Option<Cow<'a, str>>,
}

impl<'de> Deserialize<'de> for Context<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Context<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a context object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Context<'de>, A::Error> {
                let mut c = Context::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let slot = match &*key {
                        "agent" => &mut c.agent,
                        "session" => &mut c.session,
                        "project" => &mut c.project,
                        "cwd" => &mut c.cwd,
                        "title" => &mut c.title,
                        _ => return Err(de::Error::custom("not a context key")),
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom("duplicate context key"));
                    }
                    let Str(value) = map.next_value::<Str<'de>>()?;
                    *slot = Some(value);
                }
                Ok(c)
            }
        }
        d.deserialize_map(V)
    }
}

/// A string, borrowed from the payload where it holds no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl Context<'_> {
    /// The context the reference makes of it, if it accepts every value (with the same check).
    fn checked(&self) -> Option<Option<RequestContext>> {
        let field = |name: &str, v: &Option<Cow<'_, str>>| match v {
            None => Some(None),
            Some(v) => check_context_value(name, v)
                .ok()
                .map(|()| Some(v.clone().into_owned())),
        };
        Some(
            RequestContext {
                agent: field("agent", &self.agent)?,
                session: field("session", &self.session)?,
                project: field("project", &self.project)?,
                cwd: field("cwd", &self.cwd)?,
                title: field("title", &self.title)?,
            }
            .into_option(),
        )
    }
}

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

/// Whether `payload` holds an escape `\uD800`–`\uDFFF` (either case). A `\\u…` (an escaped
/// backslash before `u`) also counts, which only sends that rare frame to the reference.
/// Most frames hold no backslash at all, so it looks only where `memchr` finds one (a
/// four-byte window at every byte cost more than the rest of the parse).
fn has_surrogate_escape(payload: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', payload).any(|i| match payload.get(i + 1..i + 4) {
        Some(&[b'u', hi, lo]) => {
            matches!(hi, b'd' | b'D') && matches!(lo, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
        }
        _ => false,
    })
}

/// Whether raw JSON text `payload` may hold a number serde_json reads as out of range: one with an exponent
/// (a digit or `.`, then `e` or `E`, then a digit or sign, outside a `\u` escape; inside a
/// string too, which only sends that frame to the reference), or a run of digits long enough
/// to pass 1.8e308.
fn may_hold_huge_number(payload: &[u8]) -> bool {
    let exponent = memchr::memchr2_iter(b'e', b'E', payload).any(|i| {
        i > 0
            && matches!(payload[i - 1], b'0'..=b'9' | b'.')
            && matches!(payload.get(i + 1), Some(b'0'..=b'9' | b'+' | b'-'))
            // A hex digit of a `\uXXXX` escape (Python's json writes é as `\u00e9`).
            && !(2..=5).any(|k| i >= k && payload[i - k] == b'\\' && payload[i - k + 1] == b'u')
    });
    exponent || has_digit_run(payload, MIN_HUGE_DIGITS)
}

/// The fewest digits of an integer part past an f64's range (1.8e308 has 309).
const MIN_HUGE_DIGITS: usize = 309;

/// Whether `payload` may hold `min` digits in a row: counted in aligned eight-byte words of
/// digits, so a run a few digits shorter may count too.
fn has_digit_run(payload: &[u8], min: usize) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A run of `min` digits covers this many whole aligned words.
    let words = (min - 7) / 8;
    let mut run = 0;
    for chunk in payload.chunks_exact(8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes")) ^ (ONES * 0x30);
        // Every byte was b'0'..=b'9': now 0..=9, so no high nibble and nothing past 9.
        let digits = w & (ONES * 0xf0) == 0 && w.wrapping_add(ONES * 0x76) & (ONES * 0x80) == 0;
        run = if digits { run + 1 } else { 0 };
        if run >= words {
            return true;
        }
    }
    false
}

/// serde_json's depth limit: a `Value` nested deeper is refused.
const MAX_DEPTH: usize = 128;

/// Whether `payload` may nest arrays and objects past [`MAX_DEPTH`]: never with fewer opening
/// brackets than that (the usual frame); otherwise its nesting is measured, strings skipped.
fn may_nest_too_deep(payload: &[u8]) -> bool {
    if memchr::memchr2_iter(b'[', b'{', payload)
        .nth(MAX_DEPTH - 2)
        .is_none()
    {
        return false;
    }
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in payload {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max >= MAX_DEPTH - 1
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
