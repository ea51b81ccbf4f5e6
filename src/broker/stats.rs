//! Counts the broker keeps about outcomes and answer latency, for the `stats` frame.

use hdrhistogram::Histogram;
use tokio::time::Duration;

use crate::protocol::Outcome;

#[derive(Debug, Clone)]
pub struct BrokerStats {
    pub accepted: u64,
    pub rejected: u64,
    pub answered: u64,
    pub dismissed: u64,
    pub timeout: u64,
    pub no_ui: u64,
    pub withdrawn: u64,
    pub shutdown: u64,
    pub producer_gone: u64,
    /// Time from acceptance to a UI's answer or dismissal, in microseconds.
    latency_us: Histogram<u64>,
}

impl Default for BrokerStats {
    fn default() -> Self {
        BrokerStats {
            accepted: 0,
            rejected: 0,
            answered: 0,
            dismissed: 0,
            timeout: 0,
            no_ui: 0,
            withdrawn: 0,
            shutdown: 0,
            producer_gone: 0,
            // One microsecond to one day at 3 significant digits: a few tens of KiB, once.
            latency_us: Histogram::new_with_bounds(1, 86_400_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl BrokerStats {
    pub(super) fn count_outcome(&mut self, outcome: Outcome) {
        let n = match outcome {
            Outcome::Answered => &mut self.answered,
            Outcome::Dismissed => &mut self.dismissed,
            Outcome::Timeout => &mut self.timeout,
            Outcome::NoUi => &mut self.no_ui,
            Outcome::Withdrawn => &mut self.withdrawn,
            Outcome::Shutdown => &mut self.shutdown,
        };
        *n += 1;
    }

    pub(super) fn record_latency(&mut self, d: Duration) {
        self.latency_us
            .saturating_record(d.as_micros().max(1) as u64);
    }

    /// Requests that have reached an end (every reason but `rejected`).
    pub fn resolved(&self) -> u64 {
        self.answered
            + self.dismissed
            + self.timeout
            + self.no_ui
            + self.withdrawn
            + self.shutdown
            + self.producer_gone
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
