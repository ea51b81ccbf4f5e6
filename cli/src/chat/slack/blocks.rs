//! A card's [`View`] as Slack Block Kit: every text a `plain_text` object, escaped and with
//! mentions defused, code a preformatted `rich_text` block, buttons carrying the sealed data.

use super::*;
use crate::chat::text::defuse_mentions;

/// Slack's three control characters as entities (its documented escaping), then mentions
/// defused.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    defuse_mentions(&out)
}

/// A `plain_text` object, escaped and cut to `max` characters (before escaping).
pub(super) fn plain(s: &str, max: usize) -> Value {
    let s = if s.is_empty() { "…" } else { s };
    json!({"type": "plain_text", "text": escape(&clip(s, max)), "emoji": true})
}

/// The notification text (what a phone's banner shows) and the message's blocks.
pub fn render(view: &View<String>) -> (String, Value) {
    let mut blocks = view.blocks.clone();
    fit(&mut blocks, MAX_TEXT);
    let mut out: Vec<Value> = Vec::new();
    let mut context: Vec<Value> = Vec::new();
    let flush = |out: &mut Vec<Value>, context: &mut Vec<Value>| {
        if !context.is_empty() {
            out.push(json!({"type": "context", "elements": std::mem::take(context)}));
        }
    };
    for b in &blocks {
        match b {
            Block::Meta(s) | Block::Note(s) => {
                if context.len() == MAX_CONTEXT {
                    flush(&mut out, &mut context);
                }
                context.push(plain(s, MAX_SECTION));
            }
            other => {
                flush(&mut out, &mut context);
                out.push(match other {
                    Block::Title(s) => json!({"type": "header", "text": plain(s, MAX_HEADER)}),
                    Block::Code(s) => json!({"type": "rich_text", "elements": [
                        {"type": "rich_text_preformatted", "elements": [
                            {"type": "text", "text": escape(&clip(s, MAX_SECTION))}]}]}),
                    Block::Text(s) => json!({"type": "section", "text": plain(s, MAX_SECTION)}),
                    Block::Meta(_) | Block::Note(_) => unreachable!("handled above"),
                });
            }
        }
    }
    flush(&mut out, &mut context);
    let rows: Vec<&Vec<Button<String>>> = view.rows.iter().filter(|r| !r.is_empty()).collect();
    // One actions block per row; when that is more blocks than a message may have, the
    // buttons share blocks of 25 (Slack wraps them).
    let groups: Vec<Vec<&Button<String>>> = if out.len() + rows.len() <= MAX_BLOCKS {
        rows.iter()
            .map(|r| r.iter().take(MAX_ACTIONS).collect())
            .collect()
    } else {
        let all: Vec<&Button<String>> = rows.iter().flat_map(|r| r.iter()).collect();
        all.chunks(MAX_ACTIONS).map(<[_]>::to_vec).collect()
    };
    for (i, group) in groups.into_iter().enumerate() {
        if out.len() >= MAX_BLOCKS {
            break;
        }
        let elements: Vec<Value> = group
            .into_iter()
            .enumerate()
            .map(|(j, b)| match b {
                Button::Tap { label, action } => json!({"type": "button",
                    "action_id": format!("b{j}"), "text": plain(label, MAX_LABEL), "value": action}),
                Button::Link { label, url } => json!({"type": "button",
                    "action_id": format!("l{j}"), "text": plain(label, MAX_LABEL), "url": url}),
            })
            .collect();
        out.push(json!({"type": "actions", "block_id": format!("r{i}"), "elements": elements}));
    }
    let summary = blocks
        .iter()
        .find_map(|b| match b {
            Block::Title(s) | Block::Text(s) => Some(s.as_str()),
            _ => None,
        })
        .or_else(|| {
            blocks.first().map(|b| match b {
                Block::Title(s)
                | Block::Meta(s)
                | Block::Text(s)
                | Block::Code(s)
                | Block::Note(s) => s.as_str(),
            })
        })
        .unwrap_or("askbus");
    (escape(&clip(summary, 300)), Value::Array(out))
}
