//! Handing freed memory back to the OS once the daemon is quiet: glibc keeps what a burst
//! freed inside its arenas, so without this the daemon's RSS after a load stays near its peak.

use std::sync::atomic::Ordering;

use tokio::time::Duration;
use tokio_util::sync::CancellationToken;

use super::Hub;

/// How long the daemon must be quiet (no broker operation) before freed memory is handed back.
pub const QUIET_BEFORE_TRIM: Duration = Duration::from_secs(1);

impl Hub {
    /// Hands the allocator's free memory back to the OS each time the daemon has been quiet for
    /// `QUIET_BEFORE_TRIM` after some activity, until `stop` is cancelled. glibc keeps what a
    /// burst freed inside its per-thread arenas (only the top of a heap is ever returned), so
    /// without this the daemon's RSS after a load stays near the load's peak. Idle, it costs
    /// no wake-ups: it sleeps until the next operation.
    pub async fn trim_when_quiet(&self, stop: CancellationToken) {
        let mut trimmed_at = self.activity.load(Ordering::Relaxed);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.active.notified() => {}
            }
            // Until a whole quiet period has passed since the last operation.
            let quiet_at = loop {
                let seen = self.activity.load(Ordering::Relaxed);
                let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(self.started + last + QUIET_BEFORE_TRIM) => {}
                }
                if self.activity.load(Ordering::Relaxed) == seen {
                    break seen;
                }
            };
            if quiet_at == trimmed_at {
                continue; // a wake-up left by activity that was already trimmed after
            }
            // Off the workers: trimming walks every arena's free lists.
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
            trimmed_at = quiet_at;
        }
    }
}

/// Returns free heap pages to the OS (glibc's malloc_trim; other allocators trim themselves or
/// do not offer it).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks the allocator's own free lists under its locks.
        let released = unsafe { libc::malloc_trim(0) };
        tracing::debug!(
            released = released == 1,
            "handed free heap memory back to the OS"
        );
    }
}
