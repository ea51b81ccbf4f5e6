//! Counts the broker keeps about how requests ended and answer latency, for the `stats` frame
//! and the metrics.

use hdrhistogram::Histogram;
use tokio::time::Duration;

use crate::protocol::End;

#[derive(Debug, Clone)]
pub struct BrokerStats {
    pub accepted: u64,
    /// Requests by how they ended, indexed by [`End::index`].
    ends: [u64; End::COUNT],
    /// Time from acceptance to a UI's answer or dismissal, in microseconds.
    latency_us: Histogram<u64>,
}

impl Default for BrokerStats {
    fn default() -> Self {
        BrokerStats {
            accepted: 0,
            ends: [0; End::COUNT],
            // One microsecond to one day at 3 significant digits: a few tens of KiB, once.
            latency_us: Histogram::new_with_bounds(1, 86_400_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl BrokerStats {
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
