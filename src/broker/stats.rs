//! Counts the broker keeps about outcomes and answer latency, for the `stats` frame.

use hdrhistogram::Histogram;
use tokio::time::Duration;

use crate::protocol::{Outcome, ToolOutcome};

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
    /// The approvals among all of the above.
    pub approvals: ApprovalStats,
}

/// Counts of approvals alone (the top-level counts include them).
#[derive(Debug, Clone)]
pub struct ApprovalStats {
    pub accepted: u64,
    pub rejected: u64,
    /// Ended approvals per reason (`Outcome` order), then producer-gone.
    pub outcomes: [u64; 6],
    pub producer_gone: u64,
    /// The UIs' outcomes of answered approvals (`ToolOutcome::ALL` order).
    pub decisions: [u64; 7],
    /// Approvals whose producer was told `confirmed: true`.
    pub confirmed: u64,
    latency_us: Histogram<u64>,
}

impl Default for ApprovalStats {
    fn default() -> Self {
        ApprovalStats {
            accepted: 0,
            rejected: 0,
            outcomes: [0; 6],
            producer_gone: 0,
            decisions: [0; 7],
            confirmed: 0,
            latency_us: Histogram::new_with_bounds(1, 86_400_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl ApprovalStats {
    pub const OUTCOMES: [Outcome; 6] = [
        Outcome::Answered,
        Outcome::Dismissed,
        Outcome::Timeout,
        Outcome::NoUi,
        Outcome::Withdrawn,
        Outcome::Shutdown,
    ];

    pub(super) fn count_end(&mut self, outcome: Outcome, decision: Option<ToolOutcome>) {
        let i = Self::OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(0);
        self.outcomes[i] += 1;
        if let Some(d) = decision {
            let j = ToolOutcome::ALL.iter().position(|o| *o == d).unwrap_or(0);
            self.decisions[j] += 1;
            if d.confirms() {
                self.confirmed += 1;
            }
        }
    }

    pub(super) fn record_latency(&mut self, d: Duration) {
        self.latency_us
            .saturating_record(d.as_micros().max(1) as u64);
    }

    pub fn resolved(&self) -> u64 {
        self.outcomes.iter().sum::<u64>() + self.producer_gone
    }

    pub fn latency_count(&self) -> u64 {
        self.latency_us.len()
    }

    /// The decision latency at quantile `q` (0..=1), in milliseconds.
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
            approvals: ApprovalStats::default(),
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
