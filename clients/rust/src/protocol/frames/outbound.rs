//! Frames the daemon sends. One definition serves the daemon (encode) and clients (decode):
//! the `Serialize` derives here are the specification of the bytes on the wire, which the
//! daemon's fast encoders (`super::super::encode_fast`, feature `fast`) must equal.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    question_index, ApprovalAck, ApprovalResponse, ApprovalWithdrawn, End, Outcome, RequestContext,
    ToolOutcome, UiApproval, WithdrawReason,
};
use crate::protocol::error::{Code, FrameError, RequestKind};

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
    /// `request` (accepted), or how it ended.
    pub event: BusEventKind,
    /// RFC 3339 UTC.
    pub ts: String,
    /// `None` for a request refused before it had a usable correlationId.
    pub correlation_id: Option<String>,
    pub producer: ProducerInfo,
    /// The request's `context.agent` and `context.project`, when it had them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
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
    /// Which kind of request: on the wire `"approval"` for approvals, absent for questions
    /// (and for `notify` events, which are no request's).
    #[serde(default, skip_serializing_if = "BusRequestKind::is_question")]
    pub kind: BusRequestKind,
    /// Approvals: `toolCall.name` (absent when rejected before it was known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Approvals: `details.type`, when there were details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details_type: Option<String>,
    /// Approvals answered or dismissed: what the producer was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolOutcome>,
    /// Ends: who or what decided it, as its history record says (`None` from a daemon
    /// before this field, and on `request`, `rejected` and `notify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Box<super::DecidedBy>>,
    /// `notify` events: a notifier's delivery report (the `producer` is the notifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Box<super::NotifyFacts>>,
}

/// What a watcher event reports: a request's arrival or its [`End`]. A client reads an event
/// kind a later daemon adds as `Other`, not as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusEventKind {
    Request,
    End(End),
    Other(String),
}

impl BusEventKind {
    pub fn as_str(&self) -> &str {
        match self {
            BusEventKind::Request => "request",
            BusEventKind::End(end) => end.as_str(),
            BusEventKind::Other(s) => s,
        }
    }
}

impl From<&str> for BusEventKind {
    fn from(s: &str) -> Self {
        match s {
            "request" => BusEventKind::Request,
            other => End::parse(other)
                .map_or_else(|| BusEventKind::Other(other.to_owned()), BusEventKind::End),
        }
    }
}

impl fmt::Display for BusEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for BusEventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BusEventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Cow::<'de, str>::deserialize(d)?;
        Ok(BusEventKind::from(&*s))
    }
}

/// The kind of request a [`BusEvent`] is about. A question's event carries no `kind` (the
/// field predates approvals), so `Question` is the default and is never written; a kind a
/// later daemon adds is read as `Other`, not as an error.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BusRequestKind {
    #[default]
    Question,
    Approval,
    Other(String),
}

impl BusRequestKind {
    pub fn as_str(&self) -> &str {
        match self {
            BusRequestKind::Question => "question",
            BusRequestKind::Approval => "approval",
            BusRequestKind::Other(s) => s,
        }
    }

    /// Whether the field is left out of the frame.
    pub fn is_question(&self) -> bool {
        *self == BusRequestKind::Question
    }
}

impl From<RequestKind> for BusRequestKind {
    fn from(k: RequestKind) -> Self {
        match k {
            RequestKind::Question => BusRequestKind::Question,
            RequestKind::Approval => BusRequestKind::Approval,
        }
    }
}

impl fmt::Display for BusRequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for BusRequestKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for BusRequestKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Cow::<'de, str>::deserialize(d)?;
        Ok(match &*s {
            "question" => BusRequestKind::Question,
            "approval" => BusRequestKind::Approval,
            other => BusRequestKind::Other(other.to_owned()),
        })
    }
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
    /// The producer's `context`, as it sent it (known fields only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Box<RequestContext>>,
    /// Federation: the node the question was asked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The daemon's encoding of a `UiRequest`: the questions stay the JSON text they were
/// normalized to, so a broadcast or a replay never re-serializes (nor re-reads) them. Its
/// encoder is `encode_fast`'s (feature `fast`).
#[cfg(feature = "fast")]
#[doc(hidden)]
#[derive(Debug)]
pub struct UiRequestRef<'a> {
    pub correlation_id: &'a str,
    /// JSON text the daemon wrote itself (the normalized questions), copied in as it is.
    pub questions: &'a str,
    pub timeout_ms: u64,
    pub producer: &'a ProducerInfo,
    pub context: Option<&'a RequestContext>,
    /// Federation: the origin node (written last, as `UiRequest` serializes it).
    pub node: Option<&'a str>,
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
    /// Known to this crate, or kept as sent.
    pub code: Code,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

impl From<&FrameError> for ErrorFrame {
    fn from(e: &FrameError) -> Self {
        ErrorFrame {
            code: e.code.into(),
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
        /// Federation: the node the question was asked on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// Federation, reason `answered`: the UI that answered, and its node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered_by: Option<UiInfo>,
    },
    /// To the UI whose answer won: the producer is being sent it.
    #[serde(rename_all = "camelCase")]
    AskUserAck {
        correlation_id: String,
        outcome: Outcome,
    },
    /// To producers: the terminal answer.
    AskUserResponse(ProducerResponse),
    /// To UIs: an approval to decide.
    ToolConfirmationRequest(UiApproval),
    /// To UIs: an approval is no longer pending.
    ToolConfirmationWithdrawn(ApprovalWithdrawn),
    /// To the UI whose decision won.
    ToolConfirmationAck(ApprovalAck),
    /// To producers: the terminal answer to an approval.
    ToolConfirmationResponse(ApprovalResponse),
    Error(ErrorFrame),
    /// Live counters; fields documented in proto/PROTOCOL.md.
    Stats(Map<String, Value>),
    /// The answer to a `history` query: records newest first, and the cursor of the next
    /// page (`null` when this was the last). The records stay JSON here, as the stats do:
    /// their type (`history::HistoryRecord`) sits above the wire layer, which names no store.
    History {
        records: Vec<Value>,
        cursor: Option<String>,
    },
    /// A frame type this client version does not know (additive protocol changes).
    #[serde(other)]
    Unknown,
}

impl ServerFrame {
    pub fn error(e: &FrameError) -> ServerFrame {
        ServerFrame::Error(ErrorFrame::from(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::*;

    #[test]
    fn server_frames_round_trip() {
        let f = ServerFrame::AskUserWithdrawn {
            correlation_id: "c".into(),
            reason: WithdrawReason::ProducerGone,
            node: None,
            answered_by: None,
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
        let resp = br#"{"type":"ask-user-response","correlationId":"c","answers":{"1":"b","0":"a"},"cancelled":false,"reason":"answered","result":{"llmContent":"","returnDisplay":"","data":{"ask_user":{"question_types":["text","text"],"dismissed":false,"empty_submission":false,"answer_count":2}}}}"#;
        let ServerFrame::AskUserResponse(r) = serde_json::from_slice(resp).unwrap() else {
            panic!()
        };
        assert_eq!(r.answers[&1], "b");
        assert!(matches!(unknown, ServerFrame::Unknown));
    }

    /// A question's bus-event has no `kind`, an approval's says so, and a kind this crate
    /// does not know is kept.
    #[test]
    fn bus_event_kind_of_request_on_the_wire() {
        let question = r#"{"type":"bus-event","event":"request","ts":"t","correlationId":"c","producer":{"pid":1,"uid":0},"timeoutMs":5,"questionTypes":["text"],"headers":["H"]}"#;
        let ServerFrame::BusEvent(e) = serde_json::from_str(question).unwrap() else {
            panic!()
        };
        assert_eq!(e.kind, BusRequestKind::Question);
        let text = crate::protocol::encode(&ServerFrame::BusEvent(e.clone()));
        assert_eq!(std::str::from_utf8(&text).unwrap(), question);
        let approval =
            question.replace(r#""headers":["H"]"#, r#""headers":["H"],"kind":"approval""#);
        let ServerFrame::BusEvent(a) = serde_json::from_str(&approval).unwrap() else {
            panic!()
        };
        assert_eq!(a.kind, BusRequestKind::Approval);
        let text = crate::protocol::encode(&ServerFrame::BusEvent(a));
        assert_eq!(std::str::from_utf8(&text).unwrap(), approval);
        let later = question.replace(r#""headers":["H"]"#, r#""headers":["H"],"kind":"poll""#);
        let ServerFrame::BusEvent(l) = serde_json::from_str(&later).unwrap() else {
            panic!()
        };
        assert_eq!(l.kind, BusRequestKind::Other("poll".into()));
        assert_eq!(
            BusRequestKind::from(RequestKind::Approval).as_str(),
            "approval"
        );
    }

    /// The fast encoder of a UI's request writes what the serde derive writes.
    #[cfg(feature = "fast")]
    #[test]
    fn ui_request_by_ref_encodes_as_the_derive() {
        let questions = r#"[{"question":"Q?","header":"H","type":"text"}]"#;
        let context = RequestContext {
            agent: Some("gemini-cli/0.61.0".into()),
            project: Some("ask\"bus\u{e9}".into()),
            title: Some("t".into()),
            ..RequestContext::default()
        };
        for (id, producer, context) in [
            (
                "c",
                ProducerInfo {
                    client: Some("a/1".into()),
                    pid: Some(7),
                    uid: 1000,
                },
                None,
            ),
            (
                "q\"\u{e9}\n",
                ProducerInfo {
                    client: None,
                    pid: None,
                    uid: 0,
                },
                Some(context),
            ),
        ] {
            let by_ref = UiRequestRef {
                correlation_id: id,
                questions,
                timeout_ms: 5,
                producer: &producer,
                context: context.as_ref(),
                node: Some("n\u{e9}\"1"),
            }
            .encode();
            let owned = ServerFrame::AskUserRequest(UiRequest {
                correlation_id: id.into(),
                questions: serde_json::from_str(questions).unwrap(),
                timeout_ms: 5,
                producer,
                context: context.map(Box::new),
                node: Some("n\u{e9}\"1".into()),
            });
            assert_eq!(by_ref, crate::protocol::encode(&owned));
        }
        let by_ref = UiRequestRef {
            correlation_id: "c",
            questions,
            timeout_ms: 5,
            producer: &ProducerInfo::default(),
            context: None,
            node: None,
        }
        .encode();
        let back: ServerFrame = serde_json::from_slice(&by_ref).unwrap();
        assert!(matches!(back, ServerFrame::AskUserRequest(r) if r.timeout_ms == 5));
    }
}
