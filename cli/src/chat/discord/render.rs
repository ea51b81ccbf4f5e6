//! A card's [`View`] as a Discord message: `content` in Discord's markdown with every
//! character that could format escaped (so a question cannot make itself a masked link, a
//! heading, a quote, a spoiler or a mention), code in a fenced block whose fences it cannot
//! close, and the buttons as action rows of at most five, carrying the sealed data as their
//! `custom_id`.

use serde_json::{json, Value};

use crate::chat::card::{Block, Button, View};
use crate::chat::platform::{fit, join_blocks};
use crate::chat::text::{clip, defuse_mentions};

/// Discord's limit on a message's `content`, in characters.
pub const MAX_CONTENT: usize = 2000;
/// Buttons per action row, action rows per message, characters per button label.
const MAX_ROW: usize = 5;
const MAX_ROWS: usize = 5;
const MAX_LABEL: usize = 80;
/// Button styles: Primary, and Link (a URL, no custom_id).
const STYLE_PRIMARY: u8 = 1;
const STYLE_LINK: u8 = 5;

/// Every markdown character backslash-escaped (Discord treats a backslash before any
/// punctuation as an escape), then mentions defused.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '*'
                | '_'
                | '~'
                | '`'
                | '|'
                | '>'
                | '<'
                | '#'
                | '-'
                | '['
                | ']'
                | '('
                | ')'
                | ':'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    defuse_mentions(&out)
}

/// Code for a fenced block: nothing in it can be escaped, so a run of backticks (which could
/// close the fence) is broken up with word joiners; mentions defused.
fn code(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev_tick = false;
    for c in s.chars() {
        if c == '`' && prev_tick {
            out.push('\u{2060}');
        }
        prev_tick = c == '`';
        out.push(c);
    }
    defuse_mentions(&out)
}

fn content(blocks: &[Block]) -> String {
    join_blocks(blocks, |b| match b {
        Block::Title(s) => format!("**{}**", escape(s)),
        // Subtext, line by line (`-# ` holds for one line).
        Block::Meta(s) | Block::Note(s) => s
            .split('\n')
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("-# {}", escape(l)))
            .collect::<Vec<_>>()
            .join("\n"),
        Block::Text(s) => escape(s),
        Block::Code(s) => format!("```\n{}\n```", code(s)),
    })
}

/// The message's `content` (within [`MAX_CONTENT`] once escaped) and its `components`.
pub fn render(view: &View<String>) -> (String, Value) {
    // Escaping can double a block's length: cut the raw text until the escaped text fits.
    let mut budget = MAX_CONTENT - 100;
    let text = loop {
        let mut blocks = view.blocks.clone();
        fit(&mut blocks, budget);
        let text = content(&blocks);
        let n = text.chars().count();
        if n <= MAX_CONTENT || budget <= 100 {
            break clip(&text, MAX_CONTENT);
        }
        // Escapes grow the text in proportion: shrink the budget in the same proportion.
        budget = (budget * MAX_CONTENT / n).saturating_sub(20).max(100);
    };
    let rows: Vec<&Vec<Button<String>>> = view.rows.iter().filter(|r| !r.is_empty()).collect();
    // A row of more than five buttons is wrapped; rows beyond five are dropped (the card has
    // at most a handful: options beyond that are paged by the card itself).
    let chunks: Vec<&[Button<String>]> = rows.iter().flat_map(|r| r.chunks(MAX_ROW)).collect();
    if chunks.len() > MAX_ROWS {
        eprintln!(
            "askbus chat: discord: a message has {} rows of buttons, showing {MAX_ROWS}",
            chunks.len()
        );
    }
    let components: Vec<Value> = chunks
        .into_iter()
        .take(MAX_ROWS)
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|b| match b {
                    Button::Tap { label, action } => json!({"type": 2, "style": STYLE_PRIMARY,
                        "label": clip(label, MAX_LABEL), "custom_id": action}),
                    Button::Link { label, url } => json!({"type": 2, "style": STYLE_LINK,
                        "label": clip(label, MAX_LABEL), "url": url}),
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    (text, Value::Array(components))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_mentions_cannot_be_injected() {
        let view: View<String> = View {
            blocks: vec![
                Block::Title("# [OK](https://evil) <@123> @everyone".into()),
                Block::Code("a ``` b `".into()),
            ],
            rows: vec![],
        };
        let (text, rows) = render(&view);
        assert_eq!(
            text,
            "**\\# \\[OK\\]\\(https\\://evil\\) \\<@\u{2060}123\\> @\u{2060}everyone**\n\n\
             ```\na `\u{2060}`\u{2060}` b `\n```"
        );
        assert_eq!(rows, json!([]));
    }

    #[test]
    fn long_text_fits_after_escaping() {
        let view: View<String> = View {
            blocks: vec![Block::Text("*_".repeat(3000))],
            rows: vec![vec![
                Button::Tap {
                    label: "x".into(),
                    action: "d".into()
                };
                7
            ]],
        };
        let (text, rows) = render(&view);
        assert!(text.chars().count() <= MAX_CONTENT, "{}", text.len());
        assert!(text.chars().count() > 1500);
        assert_eq!(rows.as_array().unwrap().len(), 2);
        assert_eq!(rows[0]["components"].as_array().unwrap().len(), 5);
    }
}
