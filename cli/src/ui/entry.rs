//! The pieces of the UI's state and what flows in and out of it: a pending request with the
//! person's progress on it, the connection's state, the view, the notice line and the frames
//! to send.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use askbus::protocol::{ProducerInfo, RequestContext, ToolOutcome, UiApproval, UiRequest};
use ratatui::text::Line;

use super::approval::Decision;
use super::dialog::Dialog;
use super::scroll::Scroll;

/// What is pending: a question (the model's `ask_user`) or an approval (the agent's own
/// permission prompt), each with the person's progress on it.
pub enum Ask {
    Question {
        request: UiRequest,
        dialog: Dialog,
    },
    Approval {
        request: Box<UiApproval>,
        decision: Decision,
    },
}

/// A pending request and the person's progress on it.
pub struct Entry {
    pub ask: Ask,
    /// When the daemon will time it out, from the remaining time it sent.
    pub deadline: Instant,
    /// Shown before a reconnect and not yet confirmed by the new subscription's replay.
    pub stale: bool,
    /// Which part of a dialog taller than the screen is in view.
    pub scroll: Scroll,
    /// An approval's details as last laid out, and for which width (drawing takes the state
    /// by shared reference, hence the cell; see `render::approval`).
    pub layout: RefCell<Option<(usize, Vec<Line<'static>>)>>,
}

impl Entry {
    pub fn question(request: UiRequest, now: Instant) -> Entry {
        Entry {
            deadline: now + Duration::from_millis(request.timeout_ms),
            ask: Ask::Question {
                dialog: Dialog::from_json(&request.questions),
                request,
            },
            stale: false,
            scroll: Scroll::default(),
            layout: RefCell::default(),
        }
    }

    pub fn approval(request: Box<UiApproval>, now: Instant) -> Entry {
        Entry {
            deadline: now + Duration::from_millis(request.timeout_ms),
            ask: Ask::Approval {
                decision: Decision::for_approval(&request),
                request,
            },
            stale: false,
            scroll: Scroll::default(),
            layout: RefCell::default(),
        }
    }

    /// The question `r`, as the person left it in `draft` (what was typed kept, the request
    /// and deadline renewed) when the draft is of the same questions; else fresh.
    pub fn question_from(draft: Option<Entry>, r: UiRequest, now: Instant) -> Entry {
        match draft {
            Some(mut e) if matches!(&e.ask, Ask::Question { request, .. } if request.questions == r.questions) =>
            {
                e.deadline = now + Duration::from_millis(r.timeout_ms);
                if let Ask::Question { request, .. } = &mut e.ask {
                    *request = r;
                }
                e.stale = false;
                e
            }
            _ => Entry::question(r, now),
        }
    }

    /// The approval `a`, as the person left it in `draft` (the reason typed kept) when the
    /// draft offers the same outcomes; else fresh.
    pub fn approval_from(draft: Option<Entry>, a: Box<UiApproval>, now: Instant) -> Entry {
        match draft {
            Some(mut e) if matches!(&e.ask, Ask::Approval { request, .. } if request.outcomes == a.outcomes) =>
            {
                e.deadline = now + Duration::from_millis(a.timeout_ms);
                if let Ask::Approval { request, .. } = &mut e.ask {
                    *request = a;
                }
                e.layout.take();
                e.stale = false;
                e
            }
            _ => Entry::approval(a, now),
        }
    }

    pub fn id(&self) -> &str {
        match &self.ask {
            Ask::Question { request, .. } => &request.correlation_id,
            Ask::Approval { request, .. } => &request.correlation_id,
        }
    }

    pub fn is_approval(&self) -> bool {
        matches!(self.ask, Ask::Approval { .. })
    }

    /// "question" or "approval", as notices name it.
    pub fn noun(&self) -> &'static str {
        if self.is_approval() {
            "approval"
        } else {
            "question"
        }
    }

    fn producer(&self) -> &ProducerInfo {
        match &self.ask {
            Ask::Question { request, .. } => &request.producer,
            Ask::Approval { request, .. } => &request.producer,
        }
    }

    pub fn context(&self) -> Option<&RequestContext> {
        match &self.ask {
            Ask::Question { request, .. } => request.context.as_deref(),
            Ask::Approval { request, .. } => request.context.as_ref(),
        }
    }

    /// "client (pid N)" (federated: "client (pid N on NODE)"), as the person is told who asked.
    pub fn who(&self) -> String {
        // Federated: the node it was asked on.
        let node = match &self.ask {
            Ask::Question { request, .. } => request.node.as_deref(),
            Ask::Approval { request, .. } => request.node.as_deref(),
        };
        who(self.producer(), node)
    }

    /// The project the waiting list groups it under (`None`: asked without one).
    pub fn project(&self) -> Option<&str> {
        self.context()?.project.as_deref()
    }

    /// "agent · title" (what is known of it), safe to print; empty without a context.
    pub fn about(&self) -> String {
        let Some(c) = self.context() else {
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

pub fn who(p: &ProducerInfo, node: Option<&str>) -> String {
    // The client name is the producer's to choose: shown, never obeyed.
    let name = crate::term::sanitize(p.client.as_deref().unwrap_or("unnamed agent"));
    // Federated: the node it was asked on, since a pid alone names no machine.
    let node = node.map(crate::term::sanitize);
    match (p.pid, node) {
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
    /// An approval's decision; `message` is the reason typed for the agent; `rule` is
    /// askbus's "always" rule, written before the decision goes out.
    Decide {
        id: String,
        outcome: ToolOutcome,
        message: Option<String>,
        rule: Option<askbus_policy::tiers::AlwaysRule>,
    },
    /// An approval closed without deciding (never an approval).
    DismissApproval {
        id: String,
    },
    /// Fetch the recent history (`h`).
    LoadHistory,
    Quit,
}
