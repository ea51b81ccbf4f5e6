//! When each sink tells about each waiting request: after it has waited `after`, again every
//! `remind` until it ends, and a burst folded into one batch. Pure state over `Instant`s (no
//! clock, no I/O), so the escalation rules are tested without waiting.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// What one flush of a sink sends: a notification per request, or one for the whole batch.
#[derive(Debug, Default, PartialEq)]
pub struct Due {
    pub singles: Vec<String>,
    pub batch: Vec<String>,
}

impl Due {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.singles.is_empty() && self.batch.is_empty()
    }
}

/// One sink's timetable.
#[derive(Debug)]
pub struct Schedule {
    after: Duration,
    remind: Option<Duration>,
    /// More requests than this due at once are sent as one batch.
    max_single: usize,
    /// Request id → (arrival order, when it is next due). Absent: nothing more to send.
    next: HashMap<String, (u64, Instant)>,
}

impl Schedule {
    pub fn new(after: Duration, remind: Option<Duration>, max_single: usize) -> Schedule {
        Schedule {
            after,
            remind,
            max_single,
            next: HashMap::new(),
        }
    }

    /// A request began waiting at `since` (`seq` orders arrivals).
    pub fn add(&mut self, id: &str, seq: u64, since: Instant) {
        self.next
            .entry(id.to_owned())
            .or_insert((seq, since + self.after));
    }

    /// A request this sink already told about (an earlier notifier process pushed it): only
    /// its reminders are due, from `now`.
    pub fn add_told(&mut self, id: &str, seq: u64, now: Instant) {
        if let Some(r) = self.remind {
            self.next.entry(id.to_owned()).or_insert((seq, now + r));
        }
    }

    /// The request ended: never tell about it again.
    pub fn remove(&mut self, id: &str) {
        self.next.remove(id);
        if self.next.capacity() > 64 && self.next.len() < self.next.capacity() / 4 {
            // A burst's table is given back once it drains, so memory stays flat.
            self.next.shrink_to_fit();
        }
    }

    /// When the next request falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.next.values().map(|(_, at)| *at).min()
    }

    /// Takes what is due at `now` (oldest first), and sets each one's reminder.
    pub fn take_due(&mut self, now: Instant) -> Due {
        let mut due: Vec<(u64, String)> = self
            .next
            .iter()
            .filter(|(_, (_, at))| *at <= now)
            .map(|(id, (seq, _))| (*seq, id.clone()))
            .collect();
        due.sort_unstable();
        for (_, id) in &due {
            match self.remind {
                Some(r) => {
                    if let Some(e) = self.next.get_mut(id) {
                        e.1 = now + r;
                    }
                }
                None => {
                    self.next.remove(id);
                }
            }
        }
        let ids: Vec<String> = due.into_iter().map(|(_, id)| id).collect();
        if ids.len() > self.max_single {
            Due {
                singles: Vec::new(),
                batch: ids,
            }
        } else {
            Due {
                singles: ids,
                batch: Vec::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn waits_then_reminds_until_removed() {
        let t0 = Instant::now();
        let mut s = Schedule::new(30 * S, Some(60 * S), 3);
        s.add("a", 0, t0);
        assert!(s.take_due(t0 + 29 * S).is_empty());
        assert_eq!(s.next_due(), Some(t0 + 30 * S));
        assert_eq!(s.take_due(t0 + 30 * S).singles, ["a"]);
        assert!(s.take_due(t0 + 31 * S).is_empty());
        assert_eq!(s.take_due(t0 + 90 * S).singles, ["a"]);
        s.remove("a");
        assert_eq!(s.next_due(), None);
        assert!(s.take_due(t0 + 1000 * S).is_empty());
    }

    #[test]
    fn without_remind_tells_once() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Duration::ZERO, None, 3);
        s.add("a", 0, t0);
        s.add("a", 5, t0 + S); // a replay of the same request is not news
        assert_eq!(s.take_due(t0).singles, ["a"]);
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn what_was_told_before_only_gets_its_reminders() {
        let t0 = Instant::now();
        let mut once = Schedule::new(Duration::ZERO, None, 3);
        once.add_told("a", 0, t0);
        assert_eq!(once.next_due(), None);
        let mut reminding = Schedule::new(Duration::ZERO, Some(60 * S), 3);
        reminding.add_told("a", 0, t0);
        assert!(reminding.take_due(t0 + 59 * S).is_empty());
        assert_eq!(reminding.take_due(t0 + 60 * S).singles, ["a"]);
    }

    #[test]
    fn a_burst_is_one_batch_oldest_first() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Duration::ZERO, None, 3);
        for i in (0..1000u64).rev() {
            s.add(&format!("q{i:04}"), i, t0);
        }
        let due = s.take_due(t0);
        assert!(due.singles.is_empty());
        assert_eq!(due.batch.len(), 1000);
        assert_eq!(due.batch[0], "q0000");
        assert_eq!(due.batch[999], "q0999");
        for i in 0..1000 {
            s.remove(&format!("q{i:04}"));
        }
        assert!(s.next.capacity() <= 64);
    }

    #[test]
    fn up_to_max_single_are_told_one_by_one() {
        let t0 = Instant::now();
        let mut s = Schedule::new(Duration::ZERO, None, 3);
        for i in 0..3u64 {
            s.add(&i.to_string(), i, t0);
        }
        assert_eq!(s.take_due(t0).singles, ["0", "1", "2"]);
    }
}
