//! The fast encoders of the frames every question and every approval costs: the producer's
//! response, the winner's ack, the others' withdrawal, and a request as UIs receive it. The reference is
//! `encode(&ServerFrame::…)` (the serde derives in `frames::outbound`); these write the very
//! same bytes, which the tests here and a proptest compare on every shape, and which debug
//! builds assert on every frame they write, so every integration test is an equivalence test.

use bytes::Bytes;

#[cfg(debug_assertions)]
use super::codec::encode;
use super::codec::encode_with;
#[cfg(debug_assertions)]
use super::frames::{ApprovalAck, ApprovalWithdrawn, ServerFrame, UiApproval, UiRequest};
use super::frames::{
    ApprovalResponse, AskUserData, Outcome, ProducerResponse, ToolOutcome, UiApprovalRef,
    UiRequestRef, WithdrawReason,
};
use super::json::{write_bool, write_str, write_u64};

/// `{"type":"ask-user-withdrawn","correlationId":…,"reason":…}`
pub fn withdrawn(correlation_id: &str, reason: WithdrawReason) -> Bytes {
    let fast = id_and_word(
        br#"{"type":"ask-user-withdrawn","correlationId":"#,
        correlation_id,
        br#","reason":""#,
        reason.as_str(),
    );
    #[cfg(debug_assertions)]
    agrees(&fast, || ServerFrame::AskUserWithdrawn {
        correlation_id: correlation_id.to_owned(),
        reason,
        node: None,
        answered_by: None,
    });
    fast
}

/// `{"type":"ask-user-ack","correlationId":…,"outcome":…}`
pub fn ack(correlation_id: &str, outcome: Outcome) -> Bytes {
    let fast = id_and_word(
        br#"{"type":"ask-user-ack","correlationId":"#,
        correlation_id,
        br#","outcome":""#,
        outcome.as_str(),
    );
    #[cfg(debug_assertions)]
    agrees(&fast, || ServerFrame::AskUserAck {
        correlation_id: correlation_id.to_owned(),
        outcome,
    });
    fast
}

/// A frame of a correlationId and one word that needs no escaping (a reason, an outcome).
fn id_and_word(head: &[u8], id: &str, key: &[u8], word: &str) -> Bytes {
    encode_with(|out| {
        out.extend_from_slice(head);
        write_str(out, id);
        out.extend_from_slice(key);
        out.extend_from_slice(word.as_bytes());
        out.extend_from_slice(br#""}"#);
    })
}

/// The producer's `ask-user-response`.
pub fn response(r: &ProducerResponse) -> Bytes {
    let fast = encode_with(|out| {
        out.extend_from_slice(br#"{"type":"ask-user-response","correlationId":"#);
        write_str(out, &r.correlation_id);
        out.extend_from_slice(br#","answers":{"#);
        for (n, (index, answer)) in r.answers.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.push(b'"');
            write_u64(out, *index as u64);
            out.extend_from_slice(b"\":");
            write_str(out, answer);
        }
        out.extend_from_slice(br#"},"cancelled":"#);
        write_bool(out, r.cancelled);
        out.extend_from_slice(br#","reason":""#);
        out.extend_from_slice(r.reason.as_str().as_bytes());
        out.extend_from_slice(br#"","result":{"llmContent":"#);
        write_str(out, &r.result.llm_content);
        out.extend_from_slice(br#","returnDisplay":"#);
        write_str(out, &r.result.return_display);
        out.extend_from_slice(br#","data":{"ask_user":"#);
        write_ask_user(out, &r.result.data.ask_user);
        out.extend_from_slice(b"}}}");
    });
    #[cfg(debug_assertions)]
    agrees(&fast, || ServerFrame::AskUserResponse(r.clone()));
    fast
}

fn write_ask_user(out: &mut Vec<u8>, d: &AskUserData) {
    out.extend_from_slice(br#"{"question_types":["#);
    for (n, t) in d.question_types.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(out, t);
    }
    out.extend_from_slice(br#"],"dismissed":"#);
    write_bool(out, d.dismissed);
    if let Some(empty) = d.empty_submission {
        out.extend_from_slice(br#","empty_submission":"#);
        write_bool(out, empty);
    }
    if let Some(count) = d.answer_count {
        out.extend_from_slice(br#","answer_count":"#);
        write_u64(out, count);
    }
    if let Some(reason) = &d.reason {
        out.extend_from_slice(br#","reason":"#);
        write_str(out, reason);
    }
    out.push(b'}');
}

impl UiRequestRef<'_> {
    /// The frame's payload: the bytes `encode` gives for the same `UiRequest`.
    pub fn encode(&self) -> Bytes {
        let fast = encode_with(|out| {
            out.extend_from_slice(br#"{"type":"ask-user-request","correlationId":"#);
            write_str(out, self.correlation_id);
            out.extend_from_slice(br#","questions":"#);
            out.extend_from_slice(self.questions.as_bytes());
            out.extend_from_slice(br#","timeoutMs":"#);
            write_u64(out, self.timeout_ms);
            out.extend_from_slice(br#","producer":"#);
            serde_json::to_writer(&mut *out, self.producer).expect("ProducerInfo serializes");
            if let Some(context) = self.context {
                out.extend_from_slice(br#","context":"#);
                serde_json::to_writer(&mut *out, context).expect("RequestContext serializes");
            }
            if let Some(node) = self.node {
                out.extend_from_slice(br#","node":"#);
                write_str(out, node);
            }
            out.push(b'}');
        });
        #[cfg(debug_assertions)]
        agrees(&fast, || {
            ServerFrame::AskUserRequest(UiRequest {
                correlation_id: self.correlation_id.to_owned(),
                questions: serde_json::from_str(self.questions)
                    .expect("the daemon's own questions text is JSON"),
                timeout_ms: self.timeout_ms,
                producer: self.producer.clone(),
                context: self.context.cloned().map(Box::new),
                node: self.node.map(str::to_owned),
            })
        });
        fast
    }
}

/// `{"type":"tool-confirmation-withdrawn","correlationId":…,"reason":…}`
pub fn approval_withdrawn(correlation_id: &str, reason: WithdrawReason) -> Bytes {
    let fast = id_and_word(
        br#"{"type":"tool-confirmation-withdrawn","correlationId":"#,
        correlation_id,
        br#","reason":""#,
        reason.as_str(),
    );
    #[cfg(debug_assertions)]
    agrees(&fast, || {
        ServerFrame::ToolConfirmationWithdrawn(ApprovalWithdrawn {
            correlation_id: correlation_id.to_owned(),
            reason,
            node: None,
            answered_by: None,
        })
    });
    fast
}

/// `{"type":"tool-confirmation-ack","correlationId":…,"reason":…,"confirmed":…,"outcome":…}`
pub fn approval_ack(
    correlation_id: &str,
    reason: Outcome,
    confirmed: bool,
    outcome: ToolOutcome,
) -> Bytes {
    let fast = encode_with(|out| {
        out.extend_from_slice(br#"{"type":"tool-confirmation-ack","correlationId":"#);
        write_str(out, correlation_id);
        out.extend_from_slice(br#","reason":""#);
        out.extend_from_slice(reason.as_str().as_bytes());
        out.extend_from_slice(br#"","confirmed":"#);
        write_bool(out, confirmed);
        out.extend_from_slice(br#","outcome":""#);
        out.extend_from_slice(outcome.as_str().as_bytes());
        out.extend_from_slice(br#""}"#);
    });
    #[cfg(debug_assertions)]
    agrees(&fast, || {
        ServerFrame::ToolConfirmationAck(ApprovalAck {
            correlation_id: correlation_id.to_owned(),
            reason,
            confirmed,
            outcome,
        })
    });
    fast
}

/// The producer's `tool-confirmation-response`.
pub fn approval_response(r: &ApprovalResponse) -> Bytes {
    let fast = encode_with(|out| {
        out.extend_from_slice(br#"{"type":"tool-confirmation-response","correlationId":"#);
        write_str(out, &r.correlation_id);
        out.extend_from_slice(br#","confirmed":"#);
        write_bool(out, r.confirmed);
        out.extend_from_slice(br#","outcome":""#);
        out.extend_from_slice(r.outcome.as_str().as_bytes());
        out.extend_from_slice(br#"","reason":""#);
        out.extend_from_slice(r.reason.as_str().as_bytes());
        out.push(b'"');
        if let Some(message) = &r.message {
            out.extend_from_slice(br#","message":"#);
            write_str(out, message);
        }
        if let Some(payload) = &r.payload {
            out.extend_from_slice(br#","payload":"#);
            serde_json::to_writer(&mut *out, payload).expect("a Map serializes");
        }
        out.push(b'}');
    });
    #[cfg(debug_assertions)]
    agrees(&fast, || ServerFrame::ToolConfirmationResponse(r.clone()));
    fast
}

impl UiApprovalRef<'_> {
    /// The frame's payload: the bytes `encode` gives for the same `UiApproval`.
    pub fn encode(&self) -> Bytes {
        let fast = encode_with(|out| {
            out.extend_from_slice(br#"{"type":"tool-confirmation-request","correlationId":"#);
            write_str(out, self.correlation_id);
            out.extend_from_slice(br#","toolCall":"#);
            out.extend_from_slice(self.tool_call.as_bytes());
            if let Some(server_name) = self.server_name {
                out.extend_from_slice(br#","serverName":"#);
                write_str(out, server_name);
            }
            if let Some(annotations) = self.tool_annotations {
                out.extend_from_slice(br#","toolAnnotations":"#);
                out.extend_from_slice(annotations.as_bytes());
            }
            if let Some(subagent) = self.subagent {
                out.extend_from_slice(br#","subagent":"#);
                write_str(out, subagent);
            }
            if let Some(details) = self.details {
                out.extend_from_slice(br#","details":"#);
                out.extend_from_slice(details.as_bytes());
            }
            out.extend_from_slice(br#","outcomes":["#);
            for (n, o) in self.outcomes.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.push(b'"');
                out.extend_from_slice(o.as_str().as_bytes());
                out.push(b'"');
            }
            out.extend_from_slice(br#"],"timeoutMs":"#);
            write_u64(out, self.timeout_ms);
            out.extend_from_slice(br#","producer":"#);
            serde_json::to_writer(&mut *out, self.producer).expect("ProducerInfo serializes");
            if let Some(context) = self.context {
                out.extend_from_slice(br#","context":"#);
                serde_json::to_writer(&mut *out, context).expect("RequestContext serializes");
            }
            if let Some(node) = self.node {
                out.extend_from_slice(br#","node":"#);
                write_str(out, node);
            }
            out.push(b'}');
        });
        #[cfg(debug_assertions)]
        if let Some(reference) = self.reference() {
            agrees(&fast, || ServerFrame::ToolConfirmationRequest(reference));
        }
        fast
    }

    /// The `UiApproval` the reference encodes, when the values can be read back from their
    /// text. The texts the fast path keeps always can; one the reference path wrote from a
    /// float serde_json reads back inexactly cannot, and that text is serde's own writing of
    /// the producer's value, so there is nothing of this encoder's to check in it.
    #[cfg(debug_assertions)]
    fn reference(&self) -> Option<UiApproval> {
        let value = |text: &str| -> Option<serde_json::Value> {
            let v: serde_json::Value =
                serde_json::from_str(text).expect("the daemon's own approval text is JSON");
            (serde_json::to_string(&v).expect("a Value serializes") == text).then_some(v)
        };
        let optional = |text: Option<&str>| match text {
            None => Some(None),
            Some(text) => value(text).map(Some),
        };
        Some(UiApproval {
            correlation_id: self.correlation_id.to_owned(),
            tool_call: value(self.tool_call)?,
            server_name: self.server_name.map(str::to_owned),
            tool_annotations: optional(self.tool_annotations)?,
            subagent: self.subagent.map(str::to_owned),
            details: optional(self.details)?,
            outcomes: self.outcomes.to_vec(),
            timeout_ms: self.timeout_ms,
            producer: self.producer.clone(),
            context: self.context.cloned(),
            node: self.node.map(str::to_owned),
        })
    }
}

/// Debug builds check every frame a fast encoder writes against the reference, so every test
/// that runs the daemon is also an equivalence test of these encoders.
#[cfg(debug_assertions)]
fn agrees(fast: &Bytes, reference: impl FnOnce() -> ServerFrame) {
    let frame = reference();
    let want = encode(&frame);
    assert!(
        *fast == want,
        "fast encoder differs from the reference for {frame:?}:\n fast: {}\n  ref: {}",
        String::from_utf8_lossy(fast),
        String::from_utf8_lossy(&want)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encode;
    use crate::protocol::frames::{ResultData, ResultPayload, ServerFrame};
    use std::borrow::Cow;
    use std::collections::BTreeMap;

    fn response_of(
        answers: &[(usize, &str)],
        cancelled: bool,
        data: AskUserData,
    ) -> ProducerResponse {
        ProducerResponse {
            correlation_id: "c-\"1\"\n".into(),
            answers: answers
                .iter()
                .map(|(i, a)| (*i, a.to_string()))
                .collect::<BTreeMap<_, _>>(),
            cancelled,
            reason: if cancelled {
                Outcome::Timeout
            } else {
                Outcome::Answered
            },
            result: ResultPayload {
                llm_content: "{\"answers\":{\"0\":\"x\"}}".into(),
                return_display: "**User answered:**\n  DB → x".into(),
                data: ResultData { ask_user: data },
            },
        }
    }

    #[test]
    fn frames_are_the_bytes_serde_writes() {
        let answered = AskUserData {
            question_types: vec![Cow::Borrowed("choice"), Cow::Owned("text".into())],
            dismissed: false,
            empty_submission: Some(false),
            answer_count: Some(2),
            reason: None,
        };
        let daemon = AskUserData {
            question_types: vec![],
            dismissed: true,
            empty_submission: None,
            answer_count: None,
            reason: Some(Cow::Borrowed("timeout")),
        };
        for r in [
            response_of(
                &[(0, "SQLite"), (3, "a\tb"), (12, "")],
                false,
                answered.clone(),
            ),
            response_of(&[], false, answered),
            response_of(&[], true, daemon),
        ] {
            assert_eq!(
                response(&r),
                encode(&ServerFrame::AskUserResponse(r.clone())),
                "{r:?}"
            );
        }
        for outcome in [Outcome::Answered, Outcome::Dismissed, Outcome::NoUi] {
            let frame = ServerFrame::AskUserAck {
                correlation_id: "é\"".into(),
                outcome,
            };
            assert_eq!(ack("é\"", outcome), encode(&frame));
        }
        for reason in [
            WithdrawReason::Answered,
            WithdrawReason::ProducerGone,
            WithdrawReason::Shutdown,
        ] {
            let frame = ServerFrame::AskUserWithdrawn {
                correlation_id: "x\\y".into(),
                reason,
                node: None,
                answered_by: None,
            };
            assert_eq!(withdrawn("x\\y", reason), encode(&frame));
        }
    }
}
