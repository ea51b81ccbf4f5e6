//! The UI's connection to askbusd: a reconnecting subscription of the client crate, whose
//! every event (connected, a request, down and retrying) is forwarded to the UI loop for as
//! long as the UI runs. Each new subscription brings the daemon's replay of what is pending.

use askbus::protocol::SubscribeFilter;
use std::path::PathBuf;
use std::time::Duration;

use askbus::client::{UiAnswerer, UiEvent, UiSubscription, Update};
use tokio::sync::mpsc::UnboundedSender;

/// What the connection task tells the UI loop.
pub enum Msg {
    Connecting,
    Connected { pending: u64, answerer: UiAnswerer },
    Event(UiEvent),
    Down { error: String, retry_in: Duration },
}

/// Runs until the receiver is dropped (the UI quit).
pub async fn run(
    socket: PathBuf,
    client: String,
    filter: SubscribeFilter,
    tx: UnboundedSender<Msg>,
) {
    // A person watches this screen: refusals are shown and retried too, as they may fix them.
    let mut sub = UiSubscription::new(&socket, Some(&client))
        .via("tui")
        .filtered(filter)
        .persistent();
    if tx.send(Msg::Connecting).is_err() {
        return;
    }
    loop {
        let msg = match sub.next().await {
            Ok(Update::Connected((pending, answerer))) => Msg::Connected { pending, answerer },
            Ok(Update::Event(event)) => Msg::Event(event),
            Ok(Update::Down { error, retry_in }) => Msg::Down {
                error: error.to_string(),
                retry_in,
            },
            // Not returned by a persistent subscription.
            Err(e) => Msg::Down {
                error: e.to_string(),
                retry_in: Duration::ZERO,
            },
        };
        if tx.send(msg).is_err() {
            return;
        }
    }
}
