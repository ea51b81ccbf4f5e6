//! How long something has left, as every askbus screen and line says it ("9m 59s"), and the
//! wait for such a moment in the subscribers' loops.

use std::time::Duration;

/// "59s", "9m 58s", "2h 01m" (rounded to the nearest second).
pub fn short(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_millis() >= 500);
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Sleeps until `at`, or forever when there is nothing to wake for (a `select!` arm of the
/// subscribers' loops: the notifier and `askbus chat`).
pub async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(short(Duration::from_millis(59_400)), "59s");
        assert_eq!(short(Duration::from_secs(598)), "9m 58s");
        assert_eq!(short(Duration::from_secs(599)), "9m 59s");
        assert_eq!(short(Duration::from_secs(7260)), "2h 01m");
    }
}
