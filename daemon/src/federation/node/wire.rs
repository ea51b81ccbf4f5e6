//! What federation writes to NATS and reads back (documented in proto/PROTOCOL.md,
//! "Federation"): here, shares, ends and presence on `P.q.<node>` and the check of a shared
//! request; hellos and sync pages in `sync`; answer requests and their replies in `answer`.
//! Anything read from NATS is untrusted: a malformed entry or request is refused, never a
//! panic.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::approvals::ApprovalBody;
use crate::broker::{Body, PeerId, SharedEnd, SharedQuestion, Valid};
use crate::intake;
use crate::protocol::{json, ProducerInfo, RequestKind, UiInfo, WithdrawReason};

/// The federation protocol version this node speaks: every message carries it as `"v"`, and
/// a message of another version is refused (logged once per node), never half-read.
pub const VERSION: u64 = crate::hub::federation::PROTOCOL;

mod answer;
mod sync;

pub use answer::{answer_reply, answer_request, parse_answer, AnswerReply};
pub use sync::{
    error_reply, hello_reply, parse_hello_reply, parse_sync_page, parse_sync_request, sync_page,
    sync_request,
};

/// The envelope every message on `P.q.<node>` starts with: the version, the origin's epoch
/// (its start, Unix ms: a restart is a new epoch) and its sequence number (shares and ends
/// take the next one; a beat repeats the last one taken).
fn envelope(out: &mut Vec<u8>, epoch: u64, seq: u64) {
    out.extend_from_slice(format!(r#"{{"v":{VERSION},"epoch":{epoch},"seq":{seq}"#).as_bytes());
}

/// A pending question's share.
pub fn question(q: &SharedQuestion, deadline_ms: u64, epoch: u64, seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.body.bytes() + 256);
    envelope(&mut out, epoch, seq);
    out.extend_from_slice(br#","correlationId":"#);
    serde_json::to_writer(&mut out, &*q.id).expect("a string serializes");
    match &q.body {
        Body::Approval(body) => {
            out.extend_from_slice(br#","kind":"approval","approval":"#);
            approval_fields(&mut out, body);
        }
        Body::Questions(n) => {
            out.extend_from_slice(br#","questions":"#);
            out.extend_from_slice(n.questions.as_bytes());
        }
    }
    out.extend_from_slice(br#","producer":"#);
    serde_json::to_writer(&mut out, &q.producer).expect("ProducerInfo serializes");
    if let Some(context) = &q.context {
        out.extend_from_slice(br#","context":"#);
        serde_json::to_writer(&mut out, context).expect("RequestContext serializes");
    }
    out.extend_from_slice(
        format!(
            r#","timeoutMs":{},"deadlineMs":{deadline_ms}}}"#,
            q.timeout_ms
        )
        .as_bytes(),
    );
    out
}

/// A presence message: a beat (`{"beat":{"pending":n}}`), a hello on (re)connect (`"hello":
/// true`, sent as a request whose replies name the nodes that heard it), or a clean stop's
/// `"bye": true`.
pub fn presence(kind: Presence, epoch: u64, seq: u64, pending: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    envelope(&mut out, epoch, seq);
    match kind {
        Presence::Beat => {
            out.extend_from_slice(format!(r#","beat":{{"pending":{pending}}}}}"#).as_bytes())
        }
        Presence::Hello => out.extend_from_slice(
            format!(r#","hello":true,"beat":{{"pending":{pending}}}}}"#).as_bytes(),
        ),
        Presence::Bye => out.extend_from_slice(br#","bye":true}"#),
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Beat,
    Hello,
    Bye,
}

/// An error as a reply carries it (a sync request refused, an answer refused).
#[derive(Deserialize)]
struct ReplyError {
    code: String,
    message: String,
}

/// What an approval's entry carries: the fields of its `tool-confirmation-request` a UI is
/// shown (the effective outcomes), without the envelope. The tool call, annotations and
/// details are the JSON text the body keeps, copied in as they are.
fn approval_fields(out: &mut Vec<u8>, body: &ApprovalBody) {
    let string = |out: &mut Vec<u8>, s: &str| {
        serde_json::to_writer(&mut *out, s).expect("a string serializes")
    };
    out.extend_from_slice(br#"{"toolCall":"#);
    out.extend_from_slice(body.tool_call.as_bytes());
    if let Some(v) = &body.server_name {
        out.extend_from_slice(br#","serverName":"#);
        string(out, v);
    }
    if let Some(v) = &body.tool_annotations {
        out.extend_from_slice(br#","toolAnnotations":"#);
        out.extend_from_slice(v.as_bytes());
    }
    if let Some(v) = &body.subagent {
        out.extend_from_slice(br#","subagent":"#);
        string(out, v);
    }
    if let Some(v) = &body.details {
        out.extend_from_slice(br#","details":"#);
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(br#","outcomes":"#);
    let outcomes: Vec<&str> = body.outcomes.iter().map(|o| o.as_str()).collect();
    serde_json::to_writer(&mut *out, &outcomes).expect("strings serialize");
    out.push(b'}');
}

/// A question's end.
pub fn ended(end: &SharedEnd, epoch: u64, seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(192);
    envelope(&mut out, epoch, seq);
    out.extend_from_slice(br#","correlationId":"#);
    json::write_str(&mut out, &end.id);
    out.extend_from_slice(br#","ended":"#);
    json::write_str(&mut out, end.reason.as_str());
    if let Some(by) = &end.answered_by {
        out.extend_from_slice(br#","answeredBy":"#);
        answer::write_ui(&mut out, by, end.winner_peer);
    }
    out.push(b'}');
    out
}

/// A share or an end, as read.
#[derive(Debug)]
pub enum Entry {
    Question {
        id: String,
        /// A question's questions, or an approval's fields (`approval`).
        questions: Box<RawValue>,
        approval: bool,
        context: Option<Box<RawValue>>,
        producer: ProducerInfo,
        deadline_ms: u64,
    },
    Ended {
        id: String,
        reason: WithdrawReason,
        answered_by: Option<UiInfo>,
        /// The winning UI's connection on its node.
        winner_peer: Option<PeerId>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEntry {
    #[serde(default)]
    v: Option<u64>,
    #[serde(default)]
    epoch: Option<u64>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    beat: Option<RawBeat>,
    #[serde(default)]
    hello: bool,
    #[serde(default)]
    bye: bool,
    #[serde(default)]
    correlation_id: Option<String>,
    #[serde(default)]
    questions: Option<Box<RawValue>>,
    #[serde(default)]
    approval: Option<Box<RawValue>>,
    #[serde(default)]
    context: Option<Box<RawValue>>,
    #[serde(default)]
    producer: Option<ProducerInfo>,
    #[serde(default)]
    deadline_ms: Option<u64>,
    #[serde(default)]
    ended: Option<String>,
    #[serde(default)]
    answered_by: Option<Box<RawValue>>,
}

/// What an end's `answeredBy` says beyond `UiInfo`: the winning UI's connection on its node.
#[derive(Deserialize)]
struct RawWinner {
    #[serde(default)]
    peer: Option<Value>,
}

#[derive(Deserialize)]
struct RawBeat {
    pending: u64,
}

/// A message of `P.q.<node>`, as read: its envelope and what it says.
#[derive(Debug)]
pub struct Message {
    pub epoch: u64,
    pub seq: u64,
    pub body: Msg,
}

#[derive(Debug)]
pub enum Msg {
    Share(Entry),
    End(Entry),
    /// A beat (`hello`: the node just (re)connected and asks who hears it).
    Beat {
        pending: u64,
        hello: bool,
    },
    Bye,
}

/// Why a message was not read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("federation protocol v{0} (this node speaks v{VERSION})")]
    Version(u64),
    #[error("{0}")]
    Malformed(String),
}

pub fn parse_message(bytes: &[u8]) -> Result<Message, ParseError> {
    let raw: RawEntry =
        serde_json::from_slice(bytes).map_err(|e| ParseError::Malformed(e.to_string()))?;
    let malformed = |what: &str| ParseError::Malformed(what.to_owned());
    // The old layout's entries carry `"v":1`; a message with no version is no node's.
    let v = raw.v.ok_or_else(|| malformed("no protocol version"))?;
    if v != VERSION {
        return Err(ParseError::Version(v));
    }
    let epoch = raw.epoch.ok_or_else(|| malformed("no epoch"))?;
    let seq = raw.seq.ok_or_else(|| malformed("no sequence number"))?;
    let body = if raw.bye {
        Msg::Bye
    } else if let Some(beat) = raw.beat {
        Msg::Beat {
            pending: beat.pending,
            hello: raw.hello,
        }
    } else {
        let id = raw
            .correlation_id
            .ok_or_else(|| malformed("no correlationId"))?;
        if let Some(reason) = raw.ended {
            let reason = match reason.as_str() {
                "answered" | "dismissed" => WithdrawReason::Answered,
                "timeout" => WithdrawReason::Timeout,
                "producer-gone" => WithdrawReason::ProducerGone,
                "shutdown" => WithdrawReason::Shutdown,
                _ => WithdrawReason::Withdrawn,
            };
            // Read leniently, each on its own: who answered only describes the end.
            let by = raw.answered_by.as_deref().map(RawValue::get);
            let winner_peer = by
                .and_then(|b| serde_json::from_str::<RawWinner>(b).ok())
                .and_then(|w| w.peer?.as_u64());
            let answered_by = by.and_then(|b| serde_json::from_str::<UiInfo>(b).ok());
            Msg::End(Entry::Ended {
                id,
                reason,
                answered_by,
                winner_peer,
            })
        } else {
            let (questions, approval) = match (raw.questions, raw.approval) {
                (Some(q), None) => (q, false),
                (None, Some(a)) => (a, true),
                _ => return Err(malformed("a share holds questions or an approval")),
            };
            Msg::Share(Entry::Question {
                id,
                questions,
                approval,
                context: raw.context,
                producer: raw.producer.unwrap_or_default(),
                deadline_ms: raw.deadline_ms.ok_or_else(|| malformed("no deadlineMs"))?,
            })
        }
    };
    Ok(Message { epoch, seq, body })
}

/// A remote question through the same door as a local request (`intake::read_remote`): a node
/// that shares garbage gets it refused here, not shown.
pub fn valid_request(
    id: &str,
    questions: &RawValue,
    approval: bool,
    context: Option<&RawValue>,
) -> Result<Valid, String> {
    let mut frame = if approval {
        // The approval's fields become the frame's own: `{"type":…,"correlationId":…,` + the
        // object without its opening brace.
        let fields = questions.get().trim_start();
        let Some(rest) = fields.strip_prefix('{') else {
            return Err("an approval entry's fields must be an object".into());
        };
        let mut f = br#"{"type":"tool-confirmation-request","correlationId":"#.to_vec();
        serde_json::to_writer(&mut f, id).map_err(|e| e.to_string())?;
        if let Some(context) = context {
            f.extend_from_slice(br#","context":"#);
            f.extend_from_slice(context.get().as_bytes());
        }
        if !rest.trim_start().starts_with('}') {
            f.push(b',');
        }
        f.extend_from_slice(rest.as_bytes());
        // Through the door, as a local approval.
        return intake::read_remote(&f, RequestKind::Approval);
    } else {
        br#"{"type":"ask-user-request","correlationId":"#.to_vec()
    };
    serde_json::to_writer(&mut frame, id).map_err(|e| e.to_string())?;
    frame.extend_from_slice(br#","questions":"#);
    frame.extend_from_slice(questions.get().as_bytes());
    if let Some(context) = context {
        frame.extend_from_slice(br#","context":"#);
        frame.extend_from_slice(context.get().as_bytes());
    }
    frame.push(b'}');
    // Through the door, as a local question.
    intake::read_remote(&frame, RequestKind::Question)
}

#[cfg(test)]
mod tests;
