//! Subscriptions that outlive the daemon: a UI's ([`UiSubscription`]) and a watcher's
//! ([`WatchSubscription`]). When the connection drops (a restart, a crash, the socket
//! removed) they report it and connect again on the one [`Backoff`] policy, for as long as
//! they are polled; each new UI subscription brings the daemon's replay of what is pending.
//! Polling (`next`) is cancel-safe, so it can sit in a `select!` beside other work.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use super::{Backoff, ClientError, Ui, UiAnswerer, UiEvent, UiEvents, Watcher};
use crate::protocol::{BusEvent, SubscribeFilter};

/// What a reconnecting subscription reports.
#[derive(Debug)]
pub enum Update<C, E> {
    /// Connected (again); for a UI, the replay of the pending requests follows as events.
    Connected(C),
    Event(E),
    /// The daemon went away or could not be reached; the next attempt is in `retry_in`.
    Down {
        error: ClientError,
        retry_in: Duration,
    },
}

/// A UI subscription's news: `Connected` carries the pending count and the answerer of the
/// new connection (answers go to the daemon the questions came from).
pub type UiUpdate = Update<(u64, UiAnswerer), UiEvent>;

/// A watcher's news.
pub type WatchUpdate = Update<(), BusEvent>;

/// Whether an error is one that connecting again cannot cure: a daemon of another uid, or a
/// daemon that refused this peer its role.
fn is_refusal(e: &ClientError) -> bool {
    matches!(e, ClientError::Untrusted(_) | ClientError::Rejected(_))
}

/// The state both subscriptions share.
struct Link<S> {
    path: PathBuf,
    client: Option<String>,
    backoff: Backoff,
    /// Retry refusals too (a person watching a screen), rather than returning them.
    persistent: bool,
    live: Option<S>,
    /// When the next attempt may be made (kept across a cancelled `next`).
    retry_at: Option<Instant>,
}

impl<S> Link<S> {
    fn new(path: &Path, client: Option<&str>) -> Self {
        Link {
            path: path.to_owned(),
            client: client.map(str::to_owned),
            backoff: Backoff::default(),
            persistent: false,
            live: None,
            retry_at: None,
        }
    }

    /// The connection is gone: report it with the delay before the next attempt.
    fn down<C, E>(&mut self, error: ClientError) -> Result<Update<C, E>, ClientError> {
        self.live = None;
        if is_refusal(&error) && !self.persistent {
            return Err(error);
        }
        let retry_in = self.backoff.next_delay();
        self.retry_at = Some(Instant::now() + retry_in);
        Ok(Update::Down { error, retry_in })
    }

    async fn wait_for_retry(&mut self) {
        if let Some(at) = self.retry_at {
            tokio::time::sleep_until(at).await;
            self.retry_at = None;
        }
    }
}

/// A UI subscription that reconnects.
pub struct UiSubscription {
    link: Link<UiEvents>,
    filter: SubscribeFilter,
    via: Option<String>,
}

impl UiSubscription {
    /// Nothing happens until the first [`Self::next`], which connects.
    pub fn new(path: &Path, client: Option<&str>) -> UiSubscription {
        UiSubscription {
            link: Link::new(path, client),
            filter: SubscribeFilter::default(),
            via: None,
        }
    }

    /// Claims the kind of UI this is (`tui`, `web`, `notify`, …) on every connection: the
    /// daemon records it as `decidedBy.via` of what this UI decides.
    pub fn via(mut self, via: &str) -> Self {
        self.via = Some(via.to_owned());
        self
    }

    /// Only the requests `filter` matches (by their context), on every connection.
    pub fn filtered(mut self, filter: SubscribeFilter) -> Self {
        self.filter = filter;
        self
    }

    /// Keep retrying when the daemon refuses (forbidden, untrusted) instead of returning the
    /// refusal: for a screen that shows the state to a person, who may fix the cause.
    pub fn persistent(mut self) -> Self {
        self.link.persistent = true;
        self
    }

    /// Another policy than the shared one (tests).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.link.backoff = backoff;
        self
    }

    /// The next thing that happened. An error only for a refusal (unless `persistent`).
    pub async fn next(&mut self) -> Result<UiUpdate, ClientError> {
        if let Some(events) = &mut self.link.live {
            return match events.next().await {
                Ok(Some(event)) => Ok(Update::Event(event)),
                Ok(None) => self.link.down(ClientError::Closed),
                Err(e) => self.link.down(e),
            };
        }
        self.link.wait_for_retry().await;
        let client = self.link.client.as_deref();
        match Ui::subscribe_via(&self.link.path, client, &self.filter, self.via.as_deref()).await {
            Ok(ui) => {
                self.link.backoff.reset();
                let pending = ui.pending_at_subscribe();
                let (events, answerer) = ui.into_split();
                self.link.live = Some(events);
                Ok(Update::Connected((pending, answerer)))
            }
            Err(e) => self.link.down(e),
        }
    }
}

/// A watcher that reconnects.
pub struct WatchSubscription {
    link: Link<Watcher>,
}

impl WatchSubscription {
    /// Nothing happens until the first [`Self::next`], which connects.
    pub fn new(path: &Path, client: Option<&str>) -> WatchSubscription {
        WatchSubscription {
            link: Link::new(path, client),
        }
    }

    /// Another policy than the shared one (tests).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.link.backoff = backoff;
        self
    }

    /// The next thing that happened. An error for a refusal: a daemon that refuses a watcher
    /// will not change its mind by being asked again.
    pub async fn next(&mut self) -> Result<WatchUpdate, ClientError> {
        if let Some(watcher) = &mut self.link.live {
            return match watcher.next().await {
                Ok(Some(event)) => Ok(Update::Event(event)),
                Ok(None) => self.link.down(ClientError::Closed),
                Err(e) => self.link.down(e),
            };
        }
        self.link.wait_for_retry().await;
        match Watcher::connect(&self.link.path, self.link.client.as_deref()).await {
            Ok(watcher) => {
                self.link.backoff.reset();
                self.link.live = Some(watcher);
                Ok(Update::Connected(()))
            }
            Err(e) => self.link.down(e),
        }
    }
}
