//! What the engine and a chat platform say to each other: the engine sends [`Out`] operations
//! (post, edit, an ephemeral notice, a prompt for a typed reply) to the platform's worker,
//! which performs them in order (honouring the platform's rate limits, retrying network
//! errors with backoff) and reports back [`In`] events: what was posted, the taps and
//! replies people made. Views arrive with their buttons sealed (callback data strings).

use std::collections::VecDeque;
use std::time::Duration;

use super::card::{Block, User, View};

/// A platform's reference to a message (Telegram's message_id, Slack's `channel:ts`, …).
pub type Msg = String;

/// The key of a posted message: a request's correlationId, or [`DIGEST_KEY`].
pub const DIGEST_KEY: &str = "\u{0}digest";

#[derive(Debug, Clone)]
pub enum Out {
    Post {
        key: String,
        view: View<String>,
    },
    Edit {
        msg: Msg,
        view: View<String>,
    },
    /// An ephemeral notice to the person who tapped (`reply` is the platform's handle of the
    /// tap); empty `text` only acknowledges the tap.
    Toast {
        reply: String,
        text: String,
        alert: bool,
    },
    /// Ask for a typed reply about `key`'s message (force-reply, a modal). `tap` is the
    /// platform's handle of the tap that asked for it, not yet acknowledged: a modal opens in
    /// answer to it (Slack's `trigger_id`, Discord's interaction), a force-reply acks it.
    Prompt {
        key: String,
        reply_to: Msg,
        text: String,
        tap: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub enum In {
    Posted {
        key: String,
        msg: Msg,
    },
    Prompted {
        key: String,
        msg: Msg,
    },
    Tap {
        /// The platform's position of this event (Telegram's update_id), when it has one.
        cursor: Option<u64>,
        reply: String,
        user: User,
        data: String,
        msg: Option<Msg>,
    },
    Reply {
        cursor: Option<u64>,
        user: User,
        reply_to: Option<Msg>,
        text: String,
    },
    /// A post that could not be made (after the retries).
    Failed {
        key: String,
        error: String,
    },
    /// The platform refused us for good (a revoked token): stop.
    Fatal(String),
}

/// The blocks' text, cut so the message's visible characters stay within `max` (Telegram's
/// 4,096; Slack's and Discord's are larger, but the same budget keeps messages readable):
/// the longest block is cut first.
pub fn fit(blocks: &mut [Block], max: usize) {
    fn text(b: &mut Block) -> &mut String {
        match b {
            Block::Title(s) | Block::Meta(s) | Block::Text(s) | Block::Code(s) | Block::Note(s) => {
                s
            }
        }
    }
    // Each block costs its characters plus the separators a platform puts between blocks.
    let cost = |blocks: &mut [Block]| -> usize {
        blocks.iter_mut().map(|b| text(b).chars().count() + 2).sum()
    };
    while cost(blocks) > max {
        let over = cost(blocks) - max;
        let Some(longest) = (0..blocks.len()).max_by_key(|&i| text(&mut blocks[i]).chars().count())
        else {
            return;
        };
        let s = text(&mut blocks[longest]);
        let n = s.chars().count();
        if n <= 1 {
            return;
        }
        let keep = n.saturating_sub(over + 1).max(1);
        *s = super::text::clip(s, keep);
    }
}

/// Why a platform API call failed (every platform sorts its errors into these).
#[derive(Debug)]
pub enum Failure {
    /// 429: wait this long, then again.
    RetryAfter(Duration),
    /// Network trouble or a 5xx: retry with backoff.
    Transient(String),
    /// 401/404 on the token: nothing will work.
    Unauthorized(String),
    /// Refused as sent (400 and the like): retrying will not help.
    Refused(String),
}

pub fn failure_text(f: Failure) -> String {
    match f {
        Failure::RetryAfter(d) => format!("rate limited for {}s", d.as_secs()),
        Failure::Transient(e) | Failure::Unauthorized(e) | Failure::Refused(e) => e,
    }
}

/// Exponential backoff from 250 ms to 30 s.
#[derive(Default)]
pub struct Backoff(u32);

impl Backoff {
    pub fn next(&mut self) -> Duration {
        let d = Duration::from_millis(250u64 << self.0.min(7)).min(Duration::from_secs(30));
        self.0 += 1;
        d
    }
}

/// Queues an operation; a newer edit of a message replaces one still queued (a burst of
/// edits costs one call, which is what rate limits want).
pub fn enqueue(queue: &mut VecDeque<Out>, op: Out) {
    if let Out::Edit { msg, .. } = &op {
        if let Some(slot) = queue
            .iter_mut()
            .find(|q| matches!(q, Out::Edit { msg: m, .. } if m == msg))
        {
            *slot = op;
            return;
        }
    }
    queue.push_back(op);
}

/// Envelope or event ids seen lately: a platform that redelivers (Slack retries an envelope
/// whose ack it missed; Discord replays after a resume) applies each once.
pub struct Seen {
    order: VecDeque<String>,
    set: std::collections::HashSet<String>,
}

impl Seen {
    const KEEP: usize = 1024;

    pub fn new() -> Seen {
        Seen {
            order: VecDeque::new(),
            set: std::collections::HashSet::new(),
        }
    }

    /// Whether `id` is new (and remembers it).
    pub fn first(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() >= Self::KEEP {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        self.order.push_back(id.to_owned());
        self.set.insert(id.to_owned());
        true
    }
}
