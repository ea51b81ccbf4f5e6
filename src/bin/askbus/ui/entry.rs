//! The pieces of the UI's state and what flows in and out of it: a pending request with the
//! person's progress on it, the connection's state, the view, the notice line, the frames to
//! send and the bus updates that arrive.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use askbusd::client::UiEvent;
use askbusd::protocol::UiRequest;

use super::dialog::Dialog;
use super::scroll::Scroll;

/// A pending request and the person's progress on it.
pub struct Entry {
    pub request: UiRequest,
    pub dialog: Dialog,
    /// When the daemon will time it out, from the remaining time it sent.
    pub deadline: Instant,
    /// Shown before a reconnect and not yet confirmed by the new subscription's replay.
    pub stale: bool,
    /// Which part of a dialog taller than the screen is in view.
    pub scroll: Scroll,
}

impl Entry {
    pub fn new(request: UiRequest, now: Instant) -> Entry {
        Entry {
            dialog: Dialog::from_json(&request.questions),
            deadline: now + Duration::from_millis(request.timeout_ms),
            request,
            stale: false,
            scroll: Scroll::default(),
        }
    }

    pub fn id(&self) -> &str {
        &self.request.correlation_id
    }

    /// "client (pid N)" (federated: "client (pid N on NODE)"), as the person is told who asked.
    pub fn who(&self) -> String {
        who(&self.request)
    }

    /// The project the waiting list groups it under (`None`: asked without one).
    pub fn project(&self) -> Option<&str> {
        self.request.context.as_ref()?.project.as_deref()
    }

    /// "agent · title" (what is known of it), safe to print; empty without a context.
    pub fn about(&self) -> String {
        let Some(c) = &self.request.context else {
            return String::new();
        };
        [&c.agent, &c.title]
            .into_iter()
            .flatten()
            .map(|v| crate::term::sanitize(v).into_owned())
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

pub fn who(r: &UiRequest) -> String {
    // The client name is the producer's to choose: shown, never obeyed.
    let name = crate::term::sanitize(r.producer.client.as_deref().unwrap_or("unnamed agent"));
    // Federated: the node it was asked on, since a pid alone names no machine.
    let node = r.node.as_deref().map(crate::term::sanitize);
    match (r.producer.pid, node) {
        (Some(pid), Some(node)) => format!("{name} (pid {pid} on {node})"),
        (Some(pid), None) => format!("{name} (pid {pid})"),
        (None, Some(node)) => format!("{name} (on {node})"),
        (None, None) => name.into_owned(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conn {
    Connecting,
    Connected,
    Down { error: String, retry_at: Instant },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    List,
    /// The dialog of the entry with this correlationId.
    Dialog(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    Good,
    Warn,
    Bad,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub tone: Tone,
    /// When it stops being news and leaves the screen.
    pub until: Instant,
}

/// How long a notice stays: long enough to read, short enough not to describe a past state.
pub const NOTICE_FOR: Duration = Duration::from_secs(8);

impl Notice {
    pub fn live(&self, now: Instant) -> bool {
        now < self.until
    }
}

/// A frame the UI must send (or quitting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Answer {
        id: String,
        answers: BTreeMap<usize, String>,
    },
    Dismiss {
        id: String,
    },
    Quit,
}

/// What the connection task reports, less the answer sender (which the I/O loop keeps).
#[derive(Debug, Clone)]
pub enum BusUpdate {
    Connecting,
    /// Subscribed; `pending` requests are about to be replayed.
    Connected {
        pending: u64,
    },
    Event(UiEvent),
    Down {
        error: String,
        retry_in: Duration,
    },
}
