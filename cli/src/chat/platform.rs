//! What the engine and a chat platform say to each other: the engine sends [`Out`] operations
//! (post, edit, an ephemeral notice, a prompt for a typed reply) to the platform's worker,
//! which performs them in order (honouring the platform's rate limits, retrying network
//! errors with backoff) and reports back [`In`] events: what was posted, the taps and
//! replies people made. Views arrive with their buttons sealed (callback data strings).
//! Every platform's worker is [`sender`] around its own [`Perform`], and retries its API calls
//! with [`retrying`].

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;

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
        /// The platform's handle of the reply when it must be answered like a tap (Discord's
        /// modal submission is an interaction): the engine acks it, or refuses it, by a
        /// [`Out::Toast`].
        ack: Option<String>,
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

/// What a post's outcome means for the engine: the message it made (`msg` reads its
/// reference from the platform's answer), a failure to post (after the retries), or the end.
pub fn posted<T>(
    key: String,
    r: Result<T, Failure>,
    msg: impl FnOnce(&T) -> Option<Msg>,
) -> Option<In> {
    match r {
        Ok(v) => Some(In::Posted { key, msg: msg(&v)? }),
        Err(Failure::Unauthorized(e)) => Some(In::Fatal(e)),
        Err(e) => Some(In::Failed {
            key,
            error: failure_text(e),
        }),
    }
}

/// What an edit's outcome means for the engine: nothing (a failure is logged), or the end.
pub fn edited<T>(r: Result<T, Failure>) -> Option<In> {
    match r {
        Ok(_) => None,
        Err(Failure::Unauthorized(e)) => Some(In::Fatal(e)),
        Err(e) => {
            eprintln!("askbus chat: cannot edit a message: {}", failure_text(e));
            None
        }
    }
}

/// A platform's user object (`id`, `username`, or `alt` when it has no username) as a
/// [`User`].
pub fn json_user(u: Option<&serde_json::Value>, alt: &str) -> User {
    let s = |k: &str| {
        u.and_then(|u| u.get(k))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let name = match s("username") {
        n if n.is_empty() => s(alt),
        n => n,
    };
    User { id: s("id"), name }
}

/// The tap a modal opens in answer to (`Out::Prompt`'s), or `None`, logged: a modal needs
/// one (the engine always gives it; a platform's own redelivery might not).
pub fn modal_tap(tap: Option<String>, platform: &str) -> Option<String> {
    if tap.is_none() {
        eprintln!("askbus chat: a prompt without a tap cannot open a {platform} modal");
    }
    tap
}

/// A message's text from its blocks, each written by `one` in the platform's markup: a meta
/// or note line right below what precedes it, other blocks a blank line apart; "…" when
/// there is nothing.
pub fn join_blocks(blocks: &[Block], one: impl Fn(&Block) -> String) -> String {
    let mut text = String::new();
    for b in blocks {
        if !text.is_empty() {
            text.push_str(match b {
                Block::Meta(_) | Block::Note(_) => "\n",
                _ => "\n\n",
            });
        }
        text.push_str(&one(b));
    }
    if text.is_empty() {
        text.push('…');
    }
    text
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
        Failure::RetryAfter(d) => format!("rate limited for {:.1}s", d.as_secs_f64()),
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

/// `call`, waiting out rate limits and retrying network errors (at most `attempts` tries for
/// the latter; a 429 is always waited out, it is a promise of service). `what` names the call
/// in the log line: never a URL (a token may be in it).
pub async fn retrying<T, F, Fut>(
    platform: &str,
    what: &str,
    attempts: u32,
    mut call: F,
) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut backoff = Backoff::default();
    let mut tries = 0;
    loop {
        match call().await {
            Err(Failure::RetryAfter(d)) => {
                eprintln!(
                    "askbus chat: {platform} asks to wait {:.1}s ({what})",
                    d.as_secs_f64()
                );
                tokio::time::sleep(d).await;
            }
            Err(Failure::Transient(e)) => {
                tries += 1;
                if tries >= attempts {
                    return Err(Failure::Transient(e));
                }
                tokio::time::sleep(backoff.next()).await;
            }
            other => return other,
        }
    }
}

/// What a platform does with one engine operation (and what it reports back, if anything).
pub trait Perform: Send + 'static {
    fn perform(&mut self, op: Out) -> impl Future<Output = Option<In>> + Send;
}

/// A platform's worker: the engine's operations performed one at a time, in order, a burst
/// of edits to one message folded into one call (see [`enqueue`]).
pub async fn sender<P: Perform>(
    mut platform: P,
    mut rx: mpsc::UnboundedReceiver<Out>,
    tx: mpsc::UnboundedSender<In>,
) {
    let mut queue = VecDeque::new();
    loop {
        if queue.is_empty() {
            match rx.recv().await {
                Some(op) => enqueue(&mut queue, op),
                None => return,
            }
        }
        while let Ok(op) = rx.try_recv() {
            enqueue(&mut queue, op);
        }
        let Some(op) = queue.pop_front() else {
            continue;
        };
        if let Some(event) = platform.perform(op).await {
            if tx.send(event).is_err() {
                return;
            }
        }
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
