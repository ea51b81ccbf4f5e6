//! What a broker operation asks its caller to do: frames to send (encoded here, once per
//! broadcast: the broker's one impurity, deliberate), telemetry records and watcher events,
//! and UIs to replay to. The caller delivers them through bounded queues, never awaiting a
//! peer under the broker's lock.

use std::time::SystemTime;

use bytes::Bytes;
use tokio::time::Instant;

use super::pending::Pending;
use super::remote::FedOut;
use super::{PeerId, PeerInfo};
use crate::approvals::ApprovalBody;
use crate::protocol::{
    ApprovalResponse, BusEvent, BusEventKind, End, ErrorCode, FrameError, ProducerInfo,
    RequestContext, UiInfo,
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
}

impl Effects {
    pub fn clear(&mut self) {
        self.sends.clear();
        self.records.clear();
        self.replay.clear();
        self.events.clear();
        self.federation.clear();
    }

    pub(super) fn frame(&mut self, to: PeerId, frame: Bytes) {
        self.sends.push((to, Msg::Frame(frame)));
    }

    pub(super) fn error(&mut self, to: PeerId, err: FrameError) {
        self.sends.push((to, Msg::Error(err)));
    }
}

/// The telemetry record of a pending request's end. `answers` is the number of answers of an
/// answered request (`None` for every other end); `told`, what an approval's producer was told.
pub(super) fn record(
    id: &str,
    end: End,
    req: &Pending,
    ui: Option<UiInfo>,
    now: Instant,
    answers: Option<usize>,
    told: Option<&ApprovalResponse>,
) -> Record {
    Record {
        ts: SystemTime::UNIX_EPOCH,
        node: None,
        correlation_id: Some(id.to_owned()),
        reason: end,
        code: None,
        producer: req.producer_info.clone(),
        agent: context_field(req.context.as_deref(), |c| &c.agent),
        project: context_field(req.context.as_deref(), |c| &c.project),
        ui,
        latency_ms: (now - req.accepted_at).as_millis() as u64,
        question_types: question_types(&req.meta),
        dismissed: answers.is_none(),
        empty_submission: answers == Some(0),
        answer_count: answers.unwrap_or(0),
        approval: req
            .approval
            .as_deref()
            .map(|body| Box::new(approval_facts(Some(body), told))),
    }
}

/// The record of a request refused before it became pending.
pub(super) fn rejected_record(
    id: Option<&str>,
    code: ErrorCode,
    producer: &PeerInfo,
    meta: &[QuestionMeta],
    context: Option<&RequestContext>,
    approval: Option<&ApprovalFacts>,
) -> Record {
    Record {
        ts: SystemTime::UNIX_EPOCH,
        node: None,
        correlation_id: id.map(str::to_owned),
        reason: End::Rejected,
        code: Some(code),
        producer: producer_info(producer),
        agent: context_field(context, |c| &c.agent),
        project: context_field(context, |c| &c.project),
        ui: None,
        latency_ms: 0,
        question_types: question_types(meta),
        dismissed: false,
        empty_submission: false,
        answer_count: 0,
        approval: approval.cloned().map(Box::new),
    }
}

/// A watcher's event about a pending request: its arrival (with its timeout) or its end
/// (with its latency).
pub(super) fn event(
    kind: BusEventKind,
    id: &str,
    req: &Pending,
    ui: Option<UiInfo>,
    latency_ms: Option<u64>,
    timeout_ms: Option<u64>,
    told: Option<&ApprovalResponse>,
) -> BusEvent {
    let mut e = BusEvent {
        event: kind,
        ts: String::new(),
        correlation_id: Some(id.to_owned()),
        producer: req.producer_info.clone(),
        agent: context_field(req.context.as_deref(), |c| &c.agent),
        project: context_field(req.context.as_deref(), |c| &c.project),
        ui,
        latency_ms,
        timeout_ms,
        question_types: question_types(&req.meta)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        headers: headers(&req.meta),
        code: None,
        node: req.origin.as_deref().map(str::to_owned),
        kind: None,
        tool: None,
        details_type: None,
        confirmed: None,
        outcome: None,
        notify: None,
    };
    if let Some(body) = req.approval.as_deref() {
        approval_event(&mut e, &approval_facts(Some(body), told));
    }
    e
}

/// A watcher's event about a request refused before it became pending.
pub(super) fn rejected_event(
    id: Option<&str>,
    code: ErrorCode,
    producer: &PeerInfo,
    meta: &[QuestionMeta],
    context: Option<&RequestContext>,
    approval: Option<&ApprovalFacts>,
) -> BusEvent {
    let mut e = BusEvent {
        event: BusEventKind::End(End::Rejected),
        ts: String::new(),
        correlation_id: id.map(str::to_owned),
        producer: producer_info(producer),
        agent: context_field(context, |c| &c.agent),
        project: context_field(context, |c| &c.project),
        ui: None,
        latency_ms: None,
        timeout_ms: None,
        question_types: question_types(meta)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        headers: headers(meta),
        code: Some(code.as_str().to_owned()),
        node: None,
        kind: None,
        tool: None,
        details_type: None,
        confirmed: None,
        outcome: None,
        notify: None,
    };
    if let Some(facts) = approval {
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
    e.kind = Some("approval".into());
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
