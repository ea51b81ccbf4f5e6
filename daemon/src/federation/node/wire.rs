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
mod tests {
    use super::*;
    use crate::broker::Answer;

    #[test]
    fn an_approval_entry_is_checked_as_a_local_request_would_be() {
        let fields = |v: &str| RawValue::from_string(v.to_owned()).unwrap();
        let ok = fields(
            r#"{"toolCall":{"name":"run_shell_command","args":{}},"outcomes":["cancel","proceed_once","proceed_always"]}"#,
        );
        let context = fields(r#"{"project":"askbus"}"#);
        match valid_request("ap", &ok, true, Some(&context)) {
            Ok(a) => {
                let body = a.body().approval().expect("an approval");
                assert_eq!(body.tool(), "run_shell_command");
                assert_eq!(body.outcomes.len(), 3);
                assert_eq!(a.context().unwrap().project.as_deref(), Some("askbus"));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            r#"{"toolCall":{"name":""}}"#,
            r#"{}"#,
            r#"[1]"#,
            r#"{"toolCall":{"name":"x"},"outcomes":["maybe"]}"#,
        ] {
            assert!(
                valid_request("ap", &fields(bad), true, None).is_err(),
                "{bad}"
            );
        }
        // A share that holds both, or neither, is not read.
        assert!(parse_message(
            br#"{"v":2,"epoch":1,"seq":1,"correlationId":"x","questions":[],"approval":{},"deadlineMs":1}"#
        )
        .is_err());
    }

    #[test]
    fn malformed_entries_and_answers_are_refused() {
        assert!(parse_message(b"not json").is_err());
        assert!(parse_message(br#"{"v":2,"epoch":1,"seq":1,"correlationId":"x"}"#).is_err());
        // The old layout's entries (v1) and messages with no envelope are another protocol.
        assert_eq!(
            parse_message(
                br#"{"v":1,"node":"a","correlationId":"x","questions":[],"deadlineMs":1}"#
            )
            .unwrap_err(),
            ParseError::Version(1)
        );
        assert!(parse_message(br#"{"correlationId":"x","questions":[],"deadlineMs":1}"#).is_err());
        assert!(matches!(
            parse_message(&presence(Presence::Hello, 7, 3, 2)).unwrap(),
            Message {
                epoch: 7,
                seq: 3,
                body: Msg::Beat {
                    pending: 2,
                    hello: true
                }
            }
        ));
        assert!(matches!(
            parse_message(&presence(Presence::Bye, 7, 3, 0))
                .unwrap()
                .body,
            Msg::Bye
        ));
        assert!(parse_sync_page(&sync_page(7, 3, &[b"{}".to_vec()], None), 1 << 20).is_err());
        let page = parse_sync_page(&sync_page(7, 3, &[], Some("a")), 1 << 20).unwrap();
        assert_eq!(
            (page.epoch, page.seq, page.next.as_deref()),
            (7, 3, Some("a"))
        );
        assert_eq!(
            parse_sync_request(&sync_request(Some("a"))),
            Ok(Some("a".into()))
        );
        assert!(parse_sync_request(br#"{"v":1}"#).is_err());
        assert!(parse_answer(
            br#"{"type":"ask-user-response","correlationId":"x","answers":{"a":"b"}}"#
        )
        .is_err());
        let (resp, by, peer) = parse_answer(
            br#"{"type":"ask-user-response","correlationId":"x","answers":{"0":"b"},"ui":{"node":"B","pid":3,"peer":9}}"#,
        )
        .unwrap();
        let Answer::Question(resp) = resp else {
            panic!("a question's answer")
        };
        assert_eq!(resp.answers[&0], "b");
        assert_eq!(by.node.as_deref(), Some("B"));
        assert_eq!(peer, Some(9));
    }

    /// What `answer_request` and `ended` wrote when they went through `serde_json::Value`:
    /// the bytes on the wire must not change with the writer.
    fn ui_value(by: &UiInfo, peer: Option<PeerId>) -> Value {
        let mut v = serde_json::to_value(by).unwrap();
        if let Some(peer) = peer {
            v["peer"] = serde_json::json!(peer);
        }
        v
    }

    #[test]
    fn answers_and_ends_are_written_as_serde_wrote_them_and_read_back() {
        use crate::protocol::{
            AskUserResponse, Decision, End, ToolConfirmationResponse, ToolOutcome,
        };
        use serde_json::json;
        use std::collections::BTreeMap;
        let by = UiInfo {
            client: Some("tui \"1\"".into()),
            pid: Some(-3),
            node: Some("B".into()),
        };
        let q = Answer::Question(AskUserResponse {
            correlation_id: "q\n1".into(),
            answers: BTreeMap::from([(0, "a\"b".into()), (2, "é".into())]),
            cancelled: false,
            user: None,
        });
        let old = json!({
            "type": "ask-user-response",
            "correlationId": "q\n1",
            "answers": {"0": "a\"b", "2": "é"},
            "cancelled": false,
            "ui": ui_value(&by, Some(9)),
        });
        let bytes = answer_request(&q, &by, 9);
        assert_eq!(bytes, serde_json::to_vec(&old).unwrap());
        let (Answer::Question(resp), read_by, peer) = parse_answer(&bytes).unwrap() else {
            panic!("a question's answer")
        };
        assert_eq!(
            (resp.correlation_id.as_str(), resp.answers.len()),
            ("q\n1", 2)
        );
        assert_eq!((read_by, peer), (by.clone(), Some(9)));

        let mut payload = serde_json::Map::new();
        payload.insert("k".into(), json!([1, "x"]));
        let decided = Answer::Approval(ToolConfirmationResponse {
            correlation_id: "ap".into(),
            decision: Decision::Decided {
                outcome: ToolOutcome::ProceedOnce,
                message: Some("ok".into()),
                payload: Some(payload.clone()),
            },
            user: None,
        });
        let nobody = UiInfo {
            client: None,
            pid: None,
            node: None,
        };
        let old = json!({
            "type": "tool-confirmation-response",
            "correlationId": "ap",
            "confirmed": true,
            "outcome": "proceed_once",
            "message": "ok",
            "payload": payload,
            "ui": ui_value(&nobody, Some(0)),
        });
        let bytes = answer_request(&decided, &nobody, 0);
        assert_eq!(bytes, serde_json::to_vec(&old).unwrap());
        let (Answer::Approval(resp), read_by, peer) = parse_answer(&bytes).unwrap() else {
            panic!("an approval's decision")
        };
        assert!(matches!(
            resp.decision,
            Decision::Decided {
                outcome: ToolOutcome::ProceedOnce,
                ..
            }
        ));
        assert_eq!((read_by, peer), (nobody.clone(), Some(0)));
        let dismissed = Answer::Approval(ToolConfirmationResponse {
            correlation_id: "ap".into(),
            decision: Decision::Dismissed,
            user: None,
        });
        let old = json!({
            "type": "tool-confirmation-response",
            "correlationId": "ap",
            "dismissed": true,
            "ui": ui_value(&by, Some(1)),
        });
        assert_eq!(
            answer_request(&dismissed, &by, 1),
            serde_json::to_vec(&old).unwrap()
        );

        for (reason, answered_by, peer) in [
            (End::Answered, Some(by.clone()), Some(7)),
            (End::Answered, Some(nobody.clone()), None),
            (End::ProducerGone, None, None),
            (End::NoUi, None, None),
        ] {
            let end = SharedEnd {
                id: "e\"1".into(),
                reason,
                answered_by: answered_by.clone(),
                winner_peer: peer,
            };
            let mut old = json!({"v": VERSION, "epoch": 5, "seq": 6, "correlationId": "e\"1", "ended": reason});
            if let Some(by) = &answered_by {
                old["answeredBy"] = ui_value(by, peer);
            }
            let bytes = ended(&end, 5, 6);
            assert_eq!(bytes, serde_json::to_vec(&old).unwrap(), "{reason:?}");
            let m = parse_message(&bytes).unwrap();
            let Msg::End(Entry::Ended {
                id,
                answered_by: read,
                winner_peer,
                ..
            }) = m.body
            else {
                panic!("an end")
            };
            assert_eq!(
                (id.as_str(), read, winner_peer),
                ("e\"1", answered_by, peer)
            );
        }
    }

    #[test]
    fn an_answer_reads_the_same_wherever_its_ui_is() {
        let frame = r#""type":"ask-user-response","correlationId":"x","answers":{"0":"b"}"#;
        let ui = r#""ui" : {"node":"B","pid":3,"peer":9,"client":7}"#;
        for (text, named) in [
            (format!("{{{frame},{ui}}}"), true),
            (format!("{{ {ui} , {frame}}}"), true),
            (format!("{{{ui},{frame}}}"), true),
            (
                format!(
                    r#"{{"type":"ask-user-response",{ui},"correlationId":"x","answers":{{"0":"b"}}}}"#
                ),
                true,
            ),
            (format!("{{{frame}}}"), false),
            // A key spelt with an escape: the answer is read by the reference, its UI unnamed.
            (format!(r#"{{{frame},"u\u0069":{{"node":"B"}}}}"#), false),
        ] {
            let (resp, by, peer) =
                parse_answer(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            let Answer::Question(resp) = resp else {
                panic!("{text}")
            };
            assert_eq!(
                (resp.correlation_id.as_str(), resp.answers[&0].as_str()),
                ("x", "b"),
                "{text}"
            );
            // A field of the wrong type (`client`) is left out, not a refusal.
            let expect = named.then_some((Some("B"), Some(3), Some(9)));
            assert_eq!(
                expect.unwrap_or_default(),
                (by.node.as_deref(), by.pid, peer),
                "{text}"
            );
            assert_eq!(by.client, None, "{text}");
        }
        // Two `ui`s: the answer is read by the reference, its UI unnamed. Garbage, or a
        // request: refused.
        let (_, by, peer) = parse_answer(br#"{"type":"ask-user-response","correlationId":"x","answers":{"0":"b"},"ui":{"node":"B"},"ui":{}}"#).unwrap();
        assert_eq!((by.node, peer), (None, None));
        assert!(parse_answer(br#"{"type":"ask-user-response","ui":{}"#).is_err());
        assert!(parse_answer(
            br#"{"type":"ask-user-request","correlationId":"x","questions":[],"ui":{}}"#
        )
        .is_err());
    }
}
