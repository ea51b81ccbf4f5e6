//! Notifiers' delivery reports (`notify-report`): counted by sink and result for the metrics,
//! and relayed to the observers who may see the notifier's uid as a `notify` bus-event. A
//! report changes no request: it is what a UI says it did, so only a peer that may subscribe
//! may send one.

use std::collections::BTreeMap;

use super::{effects, Broker, Effects, PeerId};
use crate::protocol::{
    BusEvent, BusEventKind, BusRequestKind, NotifyFacts, NotifyReport, NotifyResult,
};

/// Distinct sink names counted; reports from more are counted under `other`, so a peer
/// inventing names cannot grow the daemon's memory.
const MAX_SINKS: usize = 16;

/// Deliveries by (sink, result).
#[derive(Debug, Clone, Default)]
pub struct NotifyCounts(BTreeMap<(String, NotifyResult), u64>);

impl NotifyCounts {
    fn count(&mut self, sink: &str, result: NotifyResult) {
        let sinks = self
            .0
            .keys()
            .map(|(s, _)| s)
            .collect::<std::collections::BTreeSet<_>>();
        let known = sinks.contains(&sink.to_owned());
        let sink = if known || sinks.len() < MAX_SINKS {
            sink
        } else {
            "other"
        };
        *self.0.entry((sink.to_owned(), result)).or_default() += 1;
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, NotifyResult, u64)> {
        self.0.iter().map(|((s, r), n)| (s.as_str(), *r, *n))
    }
}

impl Broker {
    pub fn notify_report(&mut self, peer: PeerId, report: NotifyReport, fx: &mut Effects) {
        if !self.may_be_ui(peer, fx) {
            return;
        }
        let p = &self.peers[&peer];
        self.stats.notify.count(&report.sink, report.result);
        fx.events.push(BusEvent {
            event: BusEventKind::Other("notify".into()),
            ts: String::new(),
            correlation_id: report.correlation_ids.first().cloned(),
            producer: effects::producer_info(&p.info),
            agent: None,
            project: None,
            ui: None,
            latency_ms: None,
            timeout_ms: None,
            question_types: Vec::new(),
            headers: Vec::new(),
            code: None,
            node: None,
            kind: BusRequestKind::Question,
            tool: None,
            details_type: None,
            confirmed: None,
            outcome: None,
            decided_by: None,
            notify: Some(Box::new(NotifyFacts {
                sink: report.sink,
                result: report.result,
                count: report.correlation_ids.len() as u64,
                error: report.error,
            })),
        });
    }
}
