//! The one reconnection policy of every askbus client (Rust, Python, Node; written in
//! proto/PROTOCOL.md, "Clients"): the first retry after 50 ms, each next delay doubled up to
//! 2 s, each delay drawn uniformly from its upper half so clients that lost the same daemon do
//! not all come back at the same instant; a successful connection starts over.

use std::time::Duration;

/// The first delay.
pub const INITIAL: Duration = Duration::from_millis(50);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(2);

/// Delays between reconnection attempts.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    initial: Duration,
    max: Duration,
    /// xorshift state for the jitter (no dependency for a random number).
    seed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, MAX)
    }
}

impl Backoff {
    /// A policy other than the shared one: for tests, which need a quick retry.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        let initial = initial.max(Duration::from_millis(1));
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32)
            | 1;
        Backoff {
            next: initial,
            initial,
            max: max.max(initial),
            seed,
        }
    }

    /// The delay before the next attempt: a draw from `[d/2, d]`, where `d` doubles (up to the
    /// maximum) with every call.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let fraction = (self.seed >> 11) as f64 / (1u64 << 53) as f64;
        d.mul_f64(0.5 + fraction / 2.0)
    }

    /// A connection succeeded: the next failure starts from the first delay again.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_their_upper_half_up_to_the_max_and_reset() {
        let mut b = Backoff::default();
        let mut top = INITIAL;
        for _ in 0..10 {
            let d = b.next_delay();
            assert!(
                d >= top / 2 && d <= top,
                "{d:?} outside [{:?}, {top:?}]",
                top / 2
            );
            top = (top * 2).min(MAX);
        }
        assert_eq!(top, MAX);
        b.reset();
        assert!(b.next_delay() <= INITIAL);
    }
}
