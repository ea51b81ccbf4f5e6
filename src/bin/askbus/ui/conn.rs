//! The UI's connection to askbusd: subscribes, forwards every event, and when the daemon goes
//! away (restart, crash, socket removed) reports it and subscribes again with backoff, for as
//! long as the UI runs. Each new subscription brings the daemon's replay of what is pending.

use askbusd::protocol::SubscribeFilter;
use std::path::PathBuf;
use std::time::Duration;

use askbusd::client::{Ui, UiAnswerer, UiEvent};
use tokio::sync::mpsc::UnboundedSender;

/// What the connection task tells the UI loop.
pub enum Msg {
    Connecting,
    Connected { pending: u64, answerer: UiAnswerer },
    Event(UiEvent),
    Down { error: String, retry_in: Duration },
}

/// Backoff before attempt `failures + 1`: quick at first (a daemon restart takes a moment),
/// then settling at a few seconds so a stopped daemon costs nothing.
pub fn backoff(failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_millis(200);
    const MAX: Duration = Duration::from_secs(5);
    FIRST.saturating_mul(1u32 << failures.min(8)).min(MAX)
}

/// Runs until the receiver is dropped (the UI quit).
pub async fn run(
    socket: PathBuf,
    client: String,
    filter: SubscribeFilter,
    tx: UnboundedSender<Msg>,
) {
    let mut failures = 0u32;
    loop {
        if tx.send(Msg::Connecting).is_err() {
            return;
        }
        let error = match Ui::subscribe_filtered(&socket, Some(&client), &filter).await {
            Ok(ui) => {
                failures = 0;
                let pending = ui.pending_at_subscribe();
                let (mut events, answerer) = ui.into_split();
                if tx.send(Msg::Connected { pending, answerer }).is_err() {
                    return;
                }
                loop {
                    match events.next().await {
                        Ok(Some(event)) => {
                            if tx.send(Msg::Event(event)).is_err() {
                                return;
                            }
                        }
                        Ok(None) => break "askbusd closed the connection".to_owned(),
                        Err(e) => break e.to_string(),
                    }
                }
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                e.to_string()
            }
        };
        let retry_in = backoff(failures);
        if tx.send(Msg::Down { error, retry_in }).is_err() {
            return;
        }
        tokio::time::sleep(retry_in).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_then_caps() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(3), Duration::from_millis(1600));
        assert_eq!(backoff(5), Duration::from_secs(5));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(5));
    }
}
