//! Counts the broker keeps about how requests ended and answer latency, for the `stats` frame
//! and the metrics: the same [`EndCounts`] for every request and for approvals alone, plus
//! what only approvals have (the UIs' decisions).

use std::ops::{Deref, DerefMut};

use hdrhistogram::Histogram;
use tokio::time::Duration;

use crate::protocol::{End, ToolOutcome};

/// How many requests were accepted and ended how, and how long answers took.
#[derive(Debug, Clone)]
pub struct EndCounts {
    pub accepted: u64,
    /// Requests by how they ended, indexed by [`End::index`].
    ends: [u64; End::COUNT],
    /// Time from acceptance to a UI's answer or dismissal, in microseconds.
    latency_us: Histogram<u64>,
}

impl Default for EndCounts {
    fn default() -> Self {
        EndCounts {
            accepted: 0,
            ends: [0; End::COUNT],
            // One microsecond to one day at 3 significant digits: a few tens of KiB, once.
            latency_us: Histogram::new_with_bounds(1, 86_400_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl EndCounts {
    pub(super) fn count(&mut self, end: End) {
        self.ends[end.index()] += 1;
    }

    pub(super) fn record_latency(&mut self, d: Duration) {
        self.latency_us
            .saturating_record(d.as_micros().max(1) as u64);
    }

    /// Requests that ended as `end`.
    pub fn ended(&self, end: End) -> u64 {
        self.ends[end.index()]
    }

    /// Every end with its count, in [`End::ALL`]'s order.
    pub fn ends(&self) -> impl Iterator<Item = (End, u64)> + '_ {
        End::ALL.into_iter().map(|e| (e, self.ended(e)))
    }

    /// Requests refused before they became pending.
    pub fn rejected(&self) -> u64 {
        self.ended(End::Rejected)
    }

    /// Requests that have reached an end (every end but `rejected`).
    pub fn resolved(&self) -> u64 {
        self.ends()
            .filter(|(e, _)| *e != End::Rejected)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn latency_count(&self) -> u64 {
        self.latency_us.len()
    }

    /// The answer latency at quantile `q` (0..=1), in milliseconds.
    pub fn latency_ms(&self, q: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn latency_max_ms(&self) -> f64 {
        self.latency_us.max() as f64 / 1000.0
    }
}

/// Every request's counts (approvals included), and approvals' and notifiers' own.
#[derive(Debug, Clone, Default)]
pub struct BrokerStats {
    all: EndCounts,
    /// The approvals among all of the above.
    pub approvals: ApprovalStats,
    /// Notifiers' deliveries (`notify-report`).
    pub notify: super::notify::NotifyCounts,
}

impl Deref for BrokerStats {
    type Target = EndCounts;
    fn deref(&self) -> &EndCounts {
        &self.all
    }
}

impl DerefMut for BrokerStats {
    fn deref_mut(&mut self) -> &mut EndCounts {
        &mut self.all
    }
}

/// Counts of approvals alone (the counts of [`BrokerStats`] include them).
#[derive(Debug, Clone, Default)]
pub struct ApprovalStats {
    all: EndCounts,
    /// The UIs' outcomes of answered approvals, in [`ToolOutcome::ALL`]'s order.
    decisions: [u64; 7],
    /// Approvals whose producer was told `confirmed: true`.
    pub confirmed: u64,
}

impl Deref for ApprovalStats {
    type Target = EndCounts;
    fn deref(&self) -> &EndCounts {
        &self.all
    }
}

impl DerefMut for ApprovalStats {
    fn deref_mut(&mut self) -> &mut EndCounts {
        &mut self.all
    }
}

impl ApprovalStats {
    /// Counts an approval's end; `decision` is the UI's outcome of an answered one.
    pub(super) fn count_decided(&mut self, end: End, decision: Option<ToolOutcome>) {
        self.all.count(end);
        if let Some(d) = decision {
            let i = ToolOutcome::ALL.iter().position(|o| *o == d).unwrap_or(0);
            self.decisions[i] += 1;
            if d.confirms() {
                self.confirmed += 1;
            }
        }
    }

    /// Every outcome a UI chose with its count, in [`ToolOutcome::ALL`]'s order.
    pub fn decisions(&self) -> impl Iterator<Item = (ToolOutcome, u64)> + '_ {
        ToolOutcome::ALL.into_iter().zip(self.decisions)
    }
}
