//! The countdown in words ("9 min left") kept true as time passes: an open request's message
//! is edited when its words change, at the card's coarse steps (`card::shown_left`), all due
//! messages at one wake-up; the platform's worker coalesces the edits and honours its rate
//! limits. A request that ended has no entry, so its message is never edited again.

use tokio::time::Instant;

use super::Engine;

impl Engine {
    /// The next countdown change of a posted message (one being posted is drawn afresh).
    pub(super) fn countdown_wake(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter(|e| e.msg.is_some() && !e.posting)
            .filter_map(|e| e.countdown)
            .min()
    }

    /// Edits the messages whose countdown changed by `now`.
    pub(super) fn countdowns(&mut self, now: Instant) {
        let due: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.msg.is_some() && !e.posting)
            .filter(|(_, e)| e.countdown.is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            // Recomputes the next change (none once it says "less than a minute left").
            self.redraw(&id);
        }
    }
}
