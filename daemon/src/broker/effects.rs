//! What a broker operation asks its caller to do: frames to send (encoded here, once per
//! broadcast: the broker's one impurity, deliberate), telemetry records and watcher events,
//! and UIs to replay to. The caller delivers them through bounded queues, never awaiting a
//! peer under the broker's lock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::body::{Body, Told};
use super::pending::Pending;
use super::{PeerId, PeerInfo};
use crate::approvals::ApprovalBody;
use crate::protocol::{
    encode_fast, ApprovalResponse, AskUserResponse, BusEvent, BusEventKind, BusRequestKind, End,
    ErrorCode, FrameError, Outcome, ProducerInfo, RequestContext, RequestKind,
    ToolConfirmationResponse, ToolOutcome, UiInfo,
};
use crate::questions::{question_types, QuestionMeta};
use crate::telemetry::record::{ApprovalFacts, Record};

/// One thing to send to one peer.
#[derive(Debug, Clone)]
pub enum Msg {
    /// An encoded frame (shared, so a broadcast is encoded once).
    Frame(Bytes),
    /// An error; encoded (and counted) by whoever delivers it.
    Error(FrameError),
}

/// What an operation asks the caller to do, in order.
#[derive(Debug, Default)]
pub struct Effects {
    pub sends: Vec<(PeerId, Msg)>,
    /// Telemetry records; `ts` and `node` are left for the caller to stamp.
    pub records: Vec<Record>,
    /// UIs that have more of the pending table to receive: call `Broker::replay` for each once
    /// their queue has room.
    pub replay: Vec<PeerId>,
    /// Events for the watchers (`Broker::watchers`); `ts` is left for the caller to stamp.
    pub events: Vec<BusEvent>,
    /// What the federation task must tell the other nodes (empty without federation).
    pub federation: Vec<FedOut>,
    /// What the store must hold before this operation's frames go out (empty without one).
    pub durable: Vec<super::Durable>,
}

impl Effects {
    pub fn clear(&mut self) {
        self.sends.clear();
        self.records.clear();
        self.replay.clear();
        self.events.clear();
        self.federation.clear();
        self.durable.clear();
    }

    pub(super) fn frame(&mut self, to: PeerId, frame: Bytes) {
        self.sends.push((to, Msg::Frame(frame)));
    }

    pub(super) fn error(&mut self, to: PeerId, err: FrameError) {
        self.sends.push((to, Msg::Error(err)));
    }
}

// What crosses to the other nodes: the federation task sends it, never under the broker's lock.

/// A local question the other nodes are to show.
#[derive(Debug, Clone)]
pub struct SharedQuestion {
    pub id: Arc<str>,
    /// What it asks: questions or an approval.
    pub body: Body,
    pub producer: ProducerInfo,
    pub context: Option<Box<RequestContext>>,
    pub timeout_ms: u64,
    /// Time left before its deadline.
    pub remaining: Duration,
}

impl SharedQuestion {
    /// A pending local request as the other nodes are sent it, with `remaining` left.
    pub(super) fn of(id: Arc<str>, req: &Pending, remaining: Duration) -> SharedQuestion {
        SharedQuestion {
            id,
            body: req.body.clone(),
            producer: req.producer_info.clone(),
            context: req.context.clone(),
            timeout_ms: req.timeout_ms,
            remaining,
        }
    }
}

/// The end of a shared question.
#[derive(Debug, Clone)]
pub struct SharedEnd {
    pub id: Arc<str>,
    /// How it ended, as every node withdraws it.
    pub reason: End,
    pub answered_by: Option<UiInfo>,
    /// When a remote UI won: its connection on its node (`Forward::ui` there), so that node
    /// can leave the winner out of the withdrawal.
    pub winner_peer: Option<PeerId>,
}

/// A UI's answer to a question or its decision on an approval.
#[derive(Debug, Clone)]
pub enum Answer {
    Question(AskUserResponse),
    Approval(ToolConfirmationResponse),
}

impl Answer {
    pub fn correlation_id(&self) -> &str {
        match self {
            Answer::Question(r) => &r.correlation_id,
            Answer::Approval(r) => &r.correlation_id,
        }
    }
}

/// What the origin told the UI whose answer it took: `ask-user-ack` or
/// `tool-confirmation-ack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    Question(Outcome),
    Approval {
        reason: Outcome,
        confirmed: bool,
        outcome: ToolOutcome,
    },
}

impl Acked {
    /// How the request ended for the producer.
    pub fn reason(&self) -> Outcome {
        match *self {
            Acked::Question(reason) | Acked::Approval { reason, .. } => reason,
        }
    }

    /// The ack frame for the UI.
    pub fn frame(&self, id: &str) -> Bytes {
        match *self {
            Acked::Question(outcome) => encode_fast::ack(id, outcome),
            Acked::Approval {
                reason,
                confirmed,
                outcome,
            } => encode_fast::approval_ack(id, reason, confirmed, outcome),
        }
    }
}

/// A local UI's answer to a remote question, to be sent to its origin.
#[derive(Debug, Clone)]
pub struct Forward {
    pub ui: PeerId,
    pub origin: Arc<str>,
    pub response: Answer,
    pub by: UiInfo,
}

/// What the federation task must do.
#[derive(Debug, Clone)]
pub enum FedOut {
    Publish(SharedQuestion),
    Ended(SharedEnd),
    Forward(Forward),
}

/// What telemetry and the watchers are told about one request, pending or refused: the same
/// facts whichever way it ended.
pub(super) struct Facts<'a> {
    pub(super) id: Option<&'a str>,
    pub(super) producer: ProducerInfo,
    pub(super) context: Option<&'a RequestContext>,
    pub(super) meta: &'a [QuestionMeta],
    /// An approval's facts (`None` for questions).
    pub(super) approval: Option<ApprovalFacts>,
    /// The node a remote request was asked on.
    pub(super) node: Option<&'a str>,
}

impl<'a> Facts<'a> {
    /// A pending request's facts; `told`, what its producer was told once it ended.
    pub(super) fn of(id: &'a str, req: &'a Pending, told: Option<&Told>) -> Facts<'a> {
        let approval = req
            .body
            .approval()
            .map(|body| approval_facts(Some(body), told.and_then(Told::approval)));
        Facts {
            id: Some(id),
            producer: req.producer_info.clone(),
            context: req.context.as_deref(),
            meta: req.body.meta(),
            approval,
            node: req.origin.remote_node().map(|n| &**n),
        }
    }

    /// A request refused before it became pending: its body when it was known, else its kind.
    pub(super) fn refused(
        id: Option<&'a str>,
        producer: ProducerInfo,
        context: Option<&'a RequestContext>,
        kind: RequestKind,
        body: Option<&'a Body>,
    ) -> Facts<'a> {
        let approval = (kind == RequestKind::Approval)
            .then(|| approval_facts(body.and_then(Body::approval), None));
        Facts {
            id,
            producer,
            context,
            meta: body.map_or(&[][..], Body::meta),
            approval,
            node: None,
        }
    }
}

/// The telemetry record of a request's end: `answers` is the number of answers of an answered
/// request (`None` for every other end), `code` a refusal's.
pub(super) fn record(
    f: &Facts<'_>,
    end: End,
    code: Option<ErrorCode>,
    ui: Option<UiInfo>,
    latency_ms: u64,
    answers: Option<usize>,
) -> Record {
    Record {
        ts: SystemTime::UNIX_EPOCH,
        node: None,
        correlation_id: f.id.map(str::to_owned),
        reason: end,
        code,
        producer: f.producer.clone(),
        agent: context_field(f.context, |c| &c.agent),
        project: context_field(f.context, |c| &c.project),
        ui,
        decided_by: None,
        latency_ms,
        question_types: question_types(f.meta),
        dismissed: code.is_none() && answers.is_none(),
        empty_submission: answers == Some(0),
        answer_count: answers.unwrap_or(0),
        approval: f.approval.clone().map(Box::new),
    }
}

/// A watcher's event about a request: its arrival (with its timeout), its end (with its
/// latency) or its refusal (with the error `code`).
pub(super) fn event(
    f: &Facts<'_>,
    kind: BusEventKind,
    code: Option<ErrorCode>,
    ui: Option<UiInfo>,
    latency_ms: Option<u64>,
    timeout_ms: Option<u64>,
) -> BusEvent {
    let mut e = BusEvent {
        event: kind,
        ts: String::new(),
        correlation_id: f.id.map(str::to_owned),
        producer: f.producer.clone(),
        agent: context_field(f.context, |c| &c.agent),
        project: context_field(f.context, |c| &c.project),
        ui,
        latency_ms,
        timeout_ms,
        question_types: question_types(f.meta)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        headers: headers(f.meta),
        code: code.map(|c| c.as_str().to_owned()),
        node: f.node.map(str::to_owned),
        kind: BusRequestKind::Question,
        tool: None,
        details_type: None,
        confirmed: None,
        outcome: None,
        decided_by: None,
        notify: None,
    };
    if let Some(facts) = &f.approval {
        approval_event(&mut e, facts);
    }
    e
}

/// An approval's telemetry facts; `told` once its producer was told something.
pub(super) fn approval_facts(
    body: Option<&ApprovalBody>,
    told: Option<&ApprovalResponse>,
) -> ApprovalFacts {
    ApprovalFacts {
        tool: body.map(|b| b.tool().to_owned()),
        details_type: body.and_then(ApprovalBody::details_type),
        confirmed: told.map(|r| r.confirmed),
        outcome: told.map(|r| r.outcome),
    }
}

/// Marks a watcher's event as an approval's.
fn approval_event(e: &mut BusEvent, facts: &ApprovalFacts) {
    e.kind = BusRequestKind::Approval;
    e.tool = facts.tool.clone();
    e.details_type = facts.details_type.map(str::to_owned);
    e.confirmed = facts.confirmed;
    e.outcome = facts.outcome;
}

/// One field of a request's context, for telemetry and watchers (which carry only `agent` and
/// `project`).
fn context_field(
    context: Option<&RequestContext>,
    field: fn(&RequestContext) -> &Option<String>,
) -> Option<String> {
    context.and_then(|c| field(c).clone())
}

/// Each question's header, or `Q<i>` where it has none (as the reference labels answers).
fn headers(meta: &[QuestionMeta]) -> Vec<String> {
    meta.iter()
        .enumerate()
        .map(|(i, m)| m.header.clone().unwrap_or_else(|| format!("Q{i}")))
        .collect()
}

pub(super) fn producer_info(info: &PeerInfo) -> ProducerInfo {
    ProducerInfo {
        client: info.client.clone(),
        pid: info.pid,
        uid: info.uid,
    }
}
