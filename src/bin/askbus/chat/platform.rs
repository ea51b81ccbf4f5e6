//! What the engine and a chat platform say to each other: the engine sends [`Out`] operations
//! (post, edit, an ephemeral notice, a prompt for a typed reply) to the platform's worker,
//! which performs them in order (honouring the platform's rate limits, retrying network
//! errors with backoff) and reports back [`In`] events: what was posted, the taps and
//! replies people made. Views arrive with their buttons sealed (callback data strings).

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
    /// Ask for a typed reply about `key`'s message (force-reply, a modal).
    Prompt {
        key: String,
        reply_to: Msg,
        text: String,
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
