//! The frames of protocol v1: what peers send the daemon (parsed leniently, checked strictly)
//! and what the daemon sends back (one typed definition used to encode and to decode).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{ErrorCode, FrameError};
use super::MAX_CORRELATION_ID_CHARS;

/// Longest `client` name a peer may announce, in characters.
pub const MAX_CLIENT_CHARS: usize = 256;

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

// ---------------------------------------------------------------------------------------------
// Frames peers send to the daemon.

/// A frame a peer sent, after the checks that need no daemon state.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Hello {
        protocol: u64,
        client: Option<String>,
    },
    Ping {
        /// `Some(Value::Null)` when the peer sent `"id": null`: echoed as sent.
        id: Option<Value>,
    },
    Stats,
    Subscribe {
        client: Option<String>,
    },
    /// Observe the bus (ops): every request's arrival and end, without question text.
    Watch {
        client: Option<String>,
    },
    AskUserRequest(AskUserRequest),
    AskUserCancel {
        correlation_id: String,
    },
    AskUserResponse(AskUserResponse),
}

/// An ask-user-request whose own fields are valid; `questions` is not yet validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AskUserRequest {
    pub correlation_id: String,
    pub timeout_ms: Option<TimeoutMs>,
    pub no_ui: Option<NoUiPolicy>,
    pub questions: RequestQuestions,
}

/// A request's questions as they arrived, for the reference's validation.
#[derive(Debug, Clone)]
pub enum RequestQuestions {
    /// The JSON text of the frame's `questions` value, from a frame whose own fields were all
    /// plain (the hot path reads them without building a tree).
    Raw(Box<RawValue>),
    /// The whole frame: it is the `params` object the reference tool validates, so a missing
    /// `questions` is reported exactly as the reference reports it.
    Params(Value),
}

impl RequestQuestions {
    /// The `params` object the reference validates. Of a raw frame only `questions` is kept:
    /// validation reads nothing else of `params`.
    pub fn into_params(self) -> Value {
        match self {
            RequestQuestions::Params(params) => params,
            RequestQuestions::Raw(raw) => {
                // The text was read as JSON once already, so it reads again.
                let questions: Value =
                    serde_json::from_str(raw.get()).expect("raw questions are valid JSON");
                let mut params = Map::new();
                params.insert("questions".to_owned(), questions);
                Value::Object(params)
            }
        }
    }
}

/// Equal when they hold the same `questions` (what validation reads), however they arrived.
impl PartialEq for RequestQuestions {
    fn eq(&self, other: &Self) -> bool {
        let questions = |q: &Self| q.clone().into_params().get("questions").cloned();
        questions(self) == questions(other)
    }
}

/// A requested timeout: a positive integer, possibly beyond what `u64` holds (then clamped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutMs {
    Ms(u64),
    /// An integral value too large for u64: clamps to the daemon's maximum.
    Huge,
}

impl TimeoutMs {
    pub fn clamp(self, max: u64) -> u64 {
        match self {
            TimeoutMs::Ms(ms) => ms.min(max),
            TimeoutMs::Huge => max,
        }
    }
}

/// A UI's answer, with its shape checked; whether its indices fit the request is the broker's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskUserResponse {
    pub correlation_id: String,
    pub answers: BTreeMap<usize, String>,
    pub cancelled: bool,
}

/// Parses one frame's payload. Errors carry the code and message the peer is sent.
pub fn parse_inbound(payload: &[u8]) -> Result<Inbound, FrameError> {
    match super::fast::parse(payload) {
        Some(frame) => Ok(frame),
        None => parse_full(payload),
    }
}

/// The parser that decides every frame the hot-path shortcut leaves alone.
pub(super) fn parse_full(payload: &[u8]) -> Result<Inbound, FrameError> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| {
        let msg = if payload.is_empty() {
            "frame is empty; expected a JSON object".to_owned()
        } else {
            format!("frame is not valid JSON: {e}")
        };
        FrameError::new(ErrorCode::InvalidJson, msg)
    })?;
    let Value::Object(obj) = &value else {
        return Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("frame must be a JSON object, not {}", kind(&value)),
        ));
    };
    let ty = match obj.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                format!("frame field \"type\" must be a string, not {}", kind(other)),
            ))
        }
        None => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                "frame has no \"type\" field",
            ))
        }
    };
    match ty {
        "hello" => parse_hello(obj),
        "ping" => Ok(Inbound::Ping {
            id: obj.get("id").cloned(),
        }),
        "stats" => Ok(Inbound::Stats),
        "subscribe" => Ok(Inbound::Subscribe {
            client: client_field(obj)?,
        }),
        "watch" => Ok(Inbound::Watch {
            client: client_field(obj)?,
        }),
        "ask-user-request" => parse_request(value).map_err(|mut e| {
            e.ask_request = true;
            e
        }),
        "ask-user-cancel" => {
            let correlation_id = correlation_id(obj, ErrorCode::InvalidRequest, "ask-user-cancel")?;
            Ok(Inbound::AskUserCancel { correlation_id })
        }
        "ask-user-response" => parse_response(obj),
        other => Err(FrameError::new(
            ErrorCode::UnknownType,
            format!("unknown frame type {:?}", truncate(other, 64)),
        )),
    }
}

fn parse_hello(obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
    let client = client_field(obj)?;
    let protocol = match obj.get("protocol") {
        // 1.0 is the integer 1 to JSON (and to the schema), whatever the sender's number type.
        Some(Value::Number(n)) if n.as_f64() == Some(super::PROTOCOL_VERSION as f64) => {
            super::PROTOCOL_VERSION
        }
        Some(other) => {
            return Err(FrameError::new(
                ErrorCode::UnsupportedProtocol,
                format!(
                    "protocol {} is not supported; this daemon speaks protocol {}",
                    truncate(&other.to_string(), 32),
                    super::PROTOCOL_VERSION
                ),
            ))
        }
        None => {
            return Err(FrameError::new(
                ErrorCode::InvalidFrame,
                "hello must carry \"protocol\": 1",
            ))
        }
    };
    Ok(Inbound::Hello { protocol, client })
}

fn parse_request(value: Value) -> Result<Inbound, FrameError> {
    let Value::Object(obj) = &value else {
        unreachable!("checked by parse_inbound")
    };
    let correlation_id = correlation_id(obj, ErrorCode::InvalidRequest, "ask-user-request")?;
    let err = |msg: String| {
        FrameError::new(ErrorCode::InvalidRequest, msg).with_id(Some(&correlation_id))
    };
    let timeout_ms = match obj.get("timeoutMs") {
        None => None,
        Some(Value::Number(n)) => {
            if let Some(ms) = n.as_u64() {
                if ms == 0 {
                    return Err(err("timeoutMs must be at least 1".into()));
                }
                Some(TimeoutMs::Ms(ms))
            } else if n.as_i64().is_some() {
                return Err(err(format!("timeoutMs must be at least 1, not {n}")));
            } else {
                // Floats: only integral values are timeouts (`5000.0` is 5000 ms, as Python's
                // json writes a float); those past u64 clamp to the max.
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() != 0.0 || !f.is_finite() {
                    return Err(err(format!("timeoutMs must be an integer, not {n}")));
                }
                if f < 1.0 {
                    return Err(err(format!("timeoutMs must be at least 1, not {n}")));
                }
                // `u64::MAX as f64` rounds up to 2^64, so below it the cast is exact.
                if f < u64::MAX as f64 {
                    Some(TimeoutMs::Ms(f as u64))
                } else {
                    Some(TimeoutMs::Huge)
                }
            }
        }
        Some(other) => {
            return Err(err(format!(
                "timeoutMs must be an integer number of milliseconds, not {}",
                kind(other)
            )))
        }
    };
    let no_ui = match obj.get("noUi") {
        None => None,
        Some(Value::String(s)) if NoUiPolicy::parse(s).is_some() => NoUiPolicy::parse(s),
        Some(other) => {
            return Err(err(format!(
                "noUi must be \"wait\" or \"reject\", not {}",
                truncate(&other.to_string(), 64)
            )))
        }
    };
    Ok(Inbound::AskUserRequest(AskUserRequest {
        correlation_id,
        timeout_ms,
        no_ui,
        questions: RequestQuestions::Params(value),
    }))
}

fn parse_response(obj: &Map<String, Value>) -> Result<Inbound, FrameError> {
    let correlation_id = correlation_id(obj, ErrorCode::InvalidResponse, "ask-user-response")?;
    let err = |msg: String| {
        FrameError::new(ErrorCode::InvalidResponse, msg).with_id(Some(&correlation_id))
    };
    let cancelled = match obj.get("cancelled") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(err(format!(
                "cancelled must be a boolean, not {}",
                kind(other)
            )))
        }
    };
    let mut answers = BTreeMap::new();
    match obj.get("answers") {
        // A dismissal carries no answers; the seed's UI still sends `answers: {}`.
        None if cancelled => {}
        None => return Err(err("ask-user-response needs an \"answers\" object".into())),
        Some(Value::Object(map)) => {
            for (key, v) in map {
                let Some(index) = question_index(key) else {
                    return Err(err(format!(
                        "answers key {:?} is not a question index (\"0\", \"1\", …)",
                        truncate(key, 32)
                    )));
                };
                let Value::String(s) = v else {
                    return Err(err(format!(
                        "answers[{key:?}] must be a string, not {}",
                        kind(v)
                    )));
                };
                answers.insert(index, s.clone());
            }
        }
        Some(other) => {
            return Err(err(format!(
                "answers must be an object keyed by question index, not {}",
                kind(other)
            )))
        }
    }
    Ok(Inbound::AskUserResponse(AskUserResponse {
        correlation_id,
        answers,
        cancelled,
    }))
}

/// A canonical decimal index ("0", "1", … without leading zeros), as JavaScript's integer-like
/// property keys are; anything else would sort differently in the reference's output.
pub(super) fn question_index(key: &str) -> Option<usize> {
    let canonical = key == "0" || (!key.starts_with('0') && key.len() <= 3);
    if !canonical || !key.bytes().all(|b| b.is_ascii_digit()) || key.is_empty() {
        return None;
    }
    key.parse().ok()
}

fn correlation_id(
    obj: &Map<String, Value>,
    code: ErrorCode,
    frame: &str,
) -> Result<String, FrameError> {
    match obj.get("correlationId") {
        Some(Value::String(id)) => {
            if id.is_empty() {
                Err(FrameError::new(code, "correlationId must not be empty"))
            } else if id.chars().count() > MAX_CORRELATION_ID_CHARS {
                Err(FrameError::new(
                    code,
                    format!("correlationId must be at most {MAX_CORRELATION_ID_CHARS} characters"),
                ))
            } else {
                Ok(id.clone())
            }
        }
        Some(other) => Err(FrameError::new(
            code,
            format!("correlationId must be a string, not {}", kind(other)),
        )),
        None => Err(FrameError::new(
            code,
            format!("{frame} needs a string \"correlationId\""),
        )),
    }
}

fn client_field(obj: &Map<String, Value>) -> Result<Option<String>, FrameError> {
    match obj.get("client") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= MAX_CLIENT_CHARS => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("client must be at most {MAX_CLIENT_CHARS} characters"),
        )),
        Some(other) => Err(FrameError::new(
            ErrorCode::InvalidFrame,
            format!("client must be a string, not {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Frames the daemon sends. One definition serves the daemon (encode) and clients (decode).

/// Who asked, as UIs are told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ProducerInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub pid: Option<i32>,
    pub uid: u32,
}

/// The UI whose answer ended a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub pid: Option<i32>,
    /// Federation: the node the UI is connected to (absent for a local UI of a daemon
    /// without federation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// One thing that happened on the bus, as watchers see it: who and how long, never the
/// question text or the answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BusEvent {
    /// `request` (accepted), an outcome (`answered`, `dismissed`, `timeout`, `no-ui`,
    /// `withdrawn`, `shutdown`), `producer-gone`, or `rejected`.
    pub event: String,
    /// RFC 3339 UTC.
    pub ts: String,
    /// `None` for a request refused before it had a usable correlationId.
    pub correlation_id: Option<String>,
    pub producer: ProducerInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<UiInfo>,
    /// Time since the request was accepted (ends only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The request's timeout (`request` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    pub question_types: Vec<String>,
    pub headers: Vec<String>,
    /// The error code (`rejected` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Federation: the question's origin node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The tool result handed to the model, as carried on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultPayload {
    pub llm_content: String,
    pub return_display: String,
    pub data: ResultData,
}

/// A result's `data`: the reference's `{"ask_user": {...}}` metrics, typed so a response is
/// written without building a tree. The fields keep the reference's key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultData {
    pub ask_user: AskUserData,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskUserData {
    pub question_types: Vec<Cow<'static, str>>,
    pub dismissed: bool,
    /// Answered results only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_submission: Option<bool>,
    /// Answered results only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_count: Option<u64>,
    /// The daemon's own outcomes only (`timeout`, `no-ui`, `withdrawn`, `shutdown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
}

/// A pending question as a UI receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiRequest {
    pub correlation_id: String,
    /// The normalized questions.
    pub questions: Value,
    /// Milliseconds left before the request times out, as of sending.
    pub timeout_ms: u64,
    pub producer: ProducerInfo,
    /// Federation: the node the question was asked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The daemon's encoding of a `UiRequest`: the questions stay the JSON text they were
/// normalized to, so a broadcast or a replay never re-serializes (nor re-reads) them.
#[derive(Debug)]
pub struct UiRequestRef<'a> {
    pub correlation_id: &'a str,
    /// JSON text the daemon wrote itself (the normalized questions), copied in as it is.
    pub questions: &'a str,
    pub timeout_ms: u64,
    pub producer: &'a ProducerInfo,
    /// Federation: the origin node (written last, as `UiRequest` serializes it).
    pub node: Option<&'a str>,
}

impl UiRequestRef<'_> {
    /// The frame's payload: the bytes `encode` gives for the same `UiRequest`.
    pub fn encode(&self) -> bytes::Bytes {
        super::encode_with(|out| {
            out.extend_from_slice(br#"{"type":"ask-user-request","correlationId":"#);
            super::hot::write_str(out, self.correlation_id);
            out.extend_from_slice(br#","questions":"#);
            out.extend_from_slice(self.questions.as_bytes());
            out.extend_from_slice(br#","timeoutMs":"#);
            out.extend_from_slice(self.timeout_ms.to_string().as_bytes());
            out.extend_from_slice(br#","producer":"#);
            serde_json::to_writer(&mut *out, self.producer).expect("ProducerInfo serializes");
            if let Some(node) = self.node {
                out.extend_from_slice(br#","node":"#);
                super::hot::write_str(out, node);
            }
            out.push(b'}');
        })
    }
}

/// The one terminal answer a producer gets for an accepted request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerResponse {
    pub correlation_id: String,
    #[serde(deserialize_with = "index_keyed")]
    pub answers: BTreeMap<usize, String>,
    pub cancelled: bool,
    pub reason: Outcome,
    pub result: ResultPayload,
}

/// Reads `{"0": "…"}` into index keys. Written by hand because serde cannot turn string keys
/// into integers once an internally tagged enum has buffered the frame.
fn index_keyed<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<usize, String>, D::Error> {
    let raw = BTreeMap::<String, String>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| match question_index(&k) {
            Some(i) => Ok((i, v)),
            None => Err(serde::de::Error::custom(format!(
                "answers key {k:?} is not a question index"
            ))),
        })
        .collect()
}

/// An error the daemon reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorFrame {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

impl From<&FrameError> for ErrorFrame {
    fn from(e: &FrameError) -> Self {
        ErrorFrame {
            code: e.code.as_str().to_owned(),
            message: e.message.clone(),
            correlation_id: e.correlation_id.clone(),
        }
    }
}

/// Every frame the daemon sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ServerFrame {
    #[serde(rename_all = "camelCase")]
    Welcome {
        protocol: u64,
        server: String,
        max_frame_bytes: u64,
        default_timeout_ms: u64,
        max_timeout_ms: u64,
    },
    Pong {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    Subscribed {
        pending: u64,
    },
    /// To watchers: events follow.
    Watching {},
    /// To watchers.
    BusEvent(BusEvent),
    /// To UIs: a question to answer.
    AskUserRequest(UiRequest),
    /// To UIs: a question is no longer pending.
    #[serde(rename_all = "camelCase")]
    AskUserWithdrawn {
        correlation_id: String,
        reason: WithdrawReason,
    },
    /// To the UI whose answer won: the producer is being sent it.
    #[serde(rename_all = "camelCase")]
    AskUserAck {
        correlation_id: String,
        outcome: Outcome,
    },
    /// To producers: the terminal answer.
    AskUserResponse(ProducerResponse),
    Error(ErrorFrame),
    /// Live counters; fields documented in proto/PROTOCOL.md.
    Stats(Map<String, Value>),
    /// A frame type this client version does not know (additive protocol changes).
    #[serde(other)]
    Unknown,
}

impl ServerFrame {
    pub fn error(e: &FrameError) -> ServerFrame {
        ServerFrame::Error(ErrorFrame::from(e))
    }
}

/// Frames a client sends, for clients built on this crate.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ClientFrame<'a> {
    Hello {
        protocol: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<&'a str>,
    },
    Ping {
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    Stats,
    Subscribe {
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<&'a str>,
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
    },
    #[serde(rename_all = "camelCase")]
    AskUserCancel {
        correlation_id: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    AskUserResponse {
        correlation_id: &'a str,
        answers: &'a BTreeMap<usize, String>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(payload: &[u8]) -> ErrorCode {
        parse_inbound(payload).unwrap_err().code
    }

    #[test]
    fn rejects_non_json_and_non_objects() {
        assert_eq!(code_of(b""), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"{"), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"\xff\xfe"), ErrorCode::InvalidJson);
        assert_eq!(code_of(b"[1]"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{\"type\":3}"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{}"), ErrorCode::InvalidFrame);
        assert_eq!(code_of(b"{\"type\":\"welcome\"}"), ErrorCode::UnknownType);
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = parse_inbound(br#"{"type":"ping","id":7}"#).unwrap();
        let b = parse_inbound(b" {\n \"id\" : 7 ,\t\"type\" : \"ping\" } ").unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn hello_protocol_checked() {
        assert!(matches!(
            parse_inbound(br#"{"type":"hello","protocol":1,"client":"t/1"}"#).unwrap(),
            Inbound::Hello {
                protocol: 1,
                client: Some(_)
            }
        ));
        assert_eq!(
            code_of(br#"{"type":"hello","protocol":2}"#),
            ErrorCode::UnsupportedProtocol
        );
        assert!(parse_inbound(br#"{"type":"hello","protocol":1.0}"#).is_ok());
        assert_eq!(
            code_of(br#"{"type":"hello","protocol":"1"}"#),
            ErrorCode::UnsupportedProtocol
        );
        assert_eq!(code_of(br#"{"type":"hello"}"#), ErrorCode::InvalidFrame);
    }

    #[test]
    fn request_fields_checked_before_questions() {
        let e = parse_inbound(br#"{"type":"ask-user-request","questions":[]}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        let long = "x".repeat(129);
        let frame = format!(r#"{{"type":"ask-user-request","correlationId":"{long}"}}"#);
        assert_eq!(code_of(frame.as_bytes()), ErrorCode::InvalidRequest);
        let ok128 = "é".repeat(128);
        let frame = format!(r#"{{"type":"ask-user-request","correlationId":"{ok128}"}}"#);
        assert!(parse_inbound(frame.as_bytes()).is_ok());
        for bad in ["0", "-5", "1.5", "\"10\"", "null"] {
            let f =
                format!(r#"{{"type":"ask-user-request","correlationId":"a","timeoutMs":{bad}}}"#);
            let e = parse_inbound(f.as_bytes()).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{bad}");
            assert_eq!(e.correlation_id.as_deref(), Some("a"));
        }
        let f = br#"{"type":"ask-user-request","correlationId":"a","timeoutMs":1e30}"#;
        let Inbound::AskUserRequest(r) = parse_inbound(f).unwrap() else {
            panic!()
        };
        assert_eq!(r.timeout_ms.unwrap().clamp(99), 99);
        for (text, ms) in [("5000.0", 5000), ("1.0", 1), ("2e3", 2000)] {
            let f =
                format!(r#"{{"type":"ask-user-request","correlationId":"a","timeoutMs":{text}}}"#);
            let Inbound::AskUserRequest(r) = parse_inbound(f.as_bytes()).unwrap() else {
                panic!()
            };
            assert_eq!(r.timeout_ms, Some(TimeoutMs::Ms(ms)), "{text}");
        }
        let f = br#"{"type":"ask-user-request","correlationId":"a","noUi":"maybe"}"#;
        assert_eq!(code_of(f), ErrorCode::InvalidRequest);
    }

    #[test]
    fn response_shape_checked() {
        let ok = br#"{"type":"ask-user-response","correlationId":"a","answers":{"1":"x","0":"y"}}"#;
        let Inbound::AskUserResponse(r) = parse_inbound(ok).unwrap() else {
            panic!()
        };
        assert_eq!(r.answers.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        for bad in [
            r#"{"type":"ask-user-response","correlationId":"a"}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":[]}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"01":"x"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"a":"x"}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{"0":1}}"#,
            r#"{"type":"ask-user-response","correlationId":"a","answers":{},"cancelled":"yes"}"#,
            r#"{"type":"ask-user-response","answers":{}}"#,
        ] {
            assert_eq!(code_of(bad.as_bytes()), ErrorCode::InvalidResponse, "{bad}");
        }
        let dismiss = br#"{"type":"ask-user-response","correlationId":"a","cancelled":true}"#;
        assert!(parse_inbound(dismiss).is_ok());
    }

    #[test]
    fn server_frames_round_trip() {
        let f = ServerFrame::AskUserWithdrawn {
            correlation_id: "c".into(),
            reason: WithdrawReason::ProducerGone,
        };
        let text = String::from_utf8(crate::protocol::encode(&f).to_vec()).unwrap();
        assert_eq!(
            text,
            r#"{"type":"ask-user-withdrawn","correlationId":"c","reason":"producer-gone"}"#
        );
        let back: ServerFrame = serde_json::from_str(&text).unwrap();
        assert!(matches!(back, ServerFrame::AskUserWithdrawn { .. }));
        let unknown: ServerFrame = serde_json::from_str(r#"{"type":"future","x":1}"#).unwrap();
        assert!(matches!(unknown, ServerFrame::Unknown));
        let questions = r#"[{"question":"Q?","header":"H","type":"text"}]"#;
        for (id, producer) in [
            (
                "c",
                ProducerInfo {
                    client: Some("a/1".into()),
                    pid: Some(7),
                    uid: 1000,
                },
            ),
            (
                "q\"\u{e9}\n",
                ProducerInfo {
                    client: None,
                    pid: None,
                    uid: 0,
                },
            ),
        ] {
            let by_ref = UiRequestRef {
                correlation_id: id,
                questions,
                timeout_ms: 5,
                producer: &producer,
                node: Some("n\u{e9}\"1"),
            }
            .encode();
            let owned = ServerFrame::AskUserRequest(UiRequest {
                correlation_id: id.into(),
                questions: serde_json::from_str(questions).unwrap(),
                timeout_ms: 5,
                producer,
                node: Some("n\u{e9}\"1".into()),
            });
            assert_eq!(by_ref, crate::protocol::encode(&owned));
        }
        let by_ref = UiRequestRef {
            correlation_id: "c",
            questions,
            timeout_ms: 5,
            producer: &ProducerInfo::default(),
            node: None,
        }
        .encode();
        let back: ServerFrame = serde_json::from_slice(&by_ref).unwrap();
        assert!(matches!(back, ServerFrame::AskUserRequest(r) if r.timeout_ms == 5));
        let resp = br#"{"type":"ask-user-response","correlationId":"c","answers":{"1":"b","0":"a"},"cancelled":false,"reason":"answered","result":{"llmContent":"","returnDisplay":"","data":{"ask_user":{"question_types":["text","text"],"dismissed":false,"empty_submission":false,"answer_count":2}}}}"#;
        let ServerFrame::AskUserResponse(r) = serde_json::from_slice(resp).unwrap() else {
            panic!()
        };
        assert_eq!(r.answers[&1], "b");
        assert!(matches!(unknown, ServerFrame::Unknown));
    }
}
