//! What a pending request is and where it came from, as types: its kind ([`Body`]: questions
//! or an approval) and its origin ([`Origin`]: a producer connection here, or another node).
//! Everything that differs by kind lives on `Body` (the frames a UI is shown and told it is
//! gone with, the bytes it holds, the producer's terminal frame through [`Told`]), so a third
//! kind is one variant the compiler chases through the broker.

use std::sync::Arc;

use bytes::Bytes;

use super::PeerId;
use crate::approvals::ApprovalBody;
use crate::protocol::{
    encode_fast, encode_with, json, ApprovalResponse, ProducerInfo, ProducerResponse,
    RequestContext, RequestKind, UiInfo, UiRequestRef, WithdrawReason,
};
use crate::questions::{Normalized, QuestionMeta};

/// What a request asks.
#[derive(Debug, Clone)]
pub enum Body {
    /// Questions, normalized: their JSON text (copied into every UI frame as it is) and what
    /// the broker keeps of each to build the result.
    Questions(Normalized),
    /// A tool call to approve.
    Approval(Box<ApprovalBody>),
}

impl Body {
    pub fn kind(&self) -> RequestKind {
        match self {
            Body::Questions(_) => RequestKind::Question,
            Body::Approval(_) => RequestKind::Approval,
        }
    }

    /// What the request holds while pending, for its uid's byte budget (its id aside).
    pub fn bytes(&self) -> usize {
        match self {
            Body::Questions(n) => n.questions.len(),
            Body::Approval(a) => a.bytes,
        }
    }

    /// The questions' facts (none for an approval).
    pub fn meta(&self) -> &[QuestionMeta] {
        match self {
            Body::Questions(n) => &n.meta,
            Body::Approval(_) => &[],
        }
    }

    pub fn approval(&self) -> Option<&ApprovalBody> {
        match self {
            Body::Questions(_) => None,
            Body::Approval(a) => Some(a),
        }
    }

    /// The request as a UI is shown it, with `timeout_ms` left; `node` once federated.
    pub fn ui_frame(
        &self,
        id: &str,
        timeout_ms: u64,
        producer: &ProducerInfo,
        context: Option<&RequestContext>,
        node: Option<&str>,
    ) -> Bytes {
        match self {
            Body::Questions(n) => UiRequestRef {
                correlation_id: id,
                questions: &n.questions,
                timeout_ms,
                producer,
                context,
                node,
            }
            .encode(),
            Body::Approval(a) => a
                .ui_frame_ref(id, timeout_ms, producer, context, node)
                .encode(),
        }
    }

    /// The frame that takes the request off a UI's screen. Once federated it names the
    /// request's `node` and, when a UI answered, which UI on which node.
    pub fn withdrawn_frame(
        &self,
        id: &str,
        reason: WithdrawReason,
        node: Option<&str>,
        answered_by: Option<&UiInfo>,
    ) -> Bytes {
        let Some(node) = node else {
            return match self {
                Body::Questions(_) => encode_fast::withdrawn(id, reason),
                Body::Approval(_) => encode_fast::approval_withdrawn(id, reason),
            };
        };
        let kind: &[u8] = match self {
            Body::Approval(_) => br#"{"type":"tool-confirmation-withdrawn","correlationId":"#,
            Body::Questions(_) => br#"{"type":"ask-user-withdrawn","correlationId":"#,
        };
        encode_with(|out| {
            out.extend_from_slice(kind);
            json::write_str(out, id);
            out.extend_from_slice(br#","reason":""#);
            out.extend_from_slice(reason.as_str().as_bytes());
            out.extend_from_slice(br#"","node":"#);
            json::write_str(out, node);
            if let Some(by) = answered_by {
                out.extend_from_slice(br#","answeredBy":"#);
                serde_json::to_writer(&mut *out, by).expect("UiInfo serializes");
            }
            out.push(b'}');
        })
    }
}

/// Where a request came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Asked here. `producer` is its connection; `None` while the producer is away (a request
    /// restored from the store, or whose producer's connection dropped) and may re-attach.
    /// `shared`: federation told the other nodes about it.
    Local {
        producer: Option<PeerId>,
        shared: bool,
    },
    /// Asked on another node, which decides it; its deadline here is the origin's plus
    /// `remote::REMOTE_GRACE`.
    Remote { node: Arc<str> },
}

impl Origin {
    /// A request a connection here just asked.
    pub fn local(producer: PeerId) -> Origin {
        Origin::Local {
            producer: Some(producer),
            shared: false,
        }
    }

    /// The connection that asked it, while it is here.
    pub fn producer(&self) -> Option<PeerId> {
        match self {
            Origin::Local { producer, .. } => *producer,
            Origin::Remote { .. } => None,
        }
    }

    /// The node it was asked on, when that is another node.
    pub fn remote_node(&self) -> Option<&Arc<str>> {
        match self {
            Origin::Local { .. } => None,
            Origin::Remote { node } => Some(node),
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Origin::Remote { .. })
    }

    /// A local request the other nodes were told about.
    pub fn is_shared(&self) -> bool {
        matches!(self, Origin::Local { shared: true, .. })
    }
}

/// What a request's producer is told at its end: its one terminal frame.
#[derive(Debug, Clone)]
pub enum Told {
    Question(ProducerResponse),
    Approval(ApprovalResponse),
}

impl Told {
    pub fn encode(&self) -> Bytes {
        match self {
            Told::Question(r) => encode_fast::response(r),
            Told::Approval(r) => encode_fast::approval_response(r),
        }
    }

    /// An approval's response, for its facts in telemetry and events.
    pub fn approval(&self) -> Option<&ApprovalResponse> {
        match self {
            Told::Question(_) => None,
            Told::Approval(r) => Some(r),
        }
    }
}
