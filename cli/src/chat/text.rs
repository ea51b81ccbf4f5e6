//! Text leaving askbus for a chat. Every string off the bus goes through [`clean`] (the CLI's
//! one neutraliser, `term::sanitize`: controls, bidi overrides, invisible characters) before
//! a card uses it; a platform then escapes its own markup and
//! calls [`defuse_mentions`] when it renders, so a question can neither format itself into a
//! fake button or link nor ping a channel. Also the fixed words the engine puts in a message.

use askbus::protocol::WithdrawReason;

use crate::term;

/// `s` neutralised line by line (newlines kept: a chat shows them as line breaks) and cut to
/// `max` characters, ending in "…" when cut.
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max * 4));
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&term::sanitize(line.strip_suffix('\r').unwrap_or(line)));
    }
    clip(&out, max)
}

/// `s` cut to `max` characters, ending in "…" when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Mentions made inert: a word joiner after every `@` (and after `!` and `#` that follow a
/// `<`, Slack's and Discord's mention syntax), so "@everyone", "@channel" or "@alice" notify
/// nobody and read the same. Called after markup escaping, on text (never on URLs).
pub fn defuse_mentions(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        out.push(c);
        if c == '@' || c == '＠' {
            out.push('\u{2060}');
        }
    }
    out
}

/// What a request's message says when it was withdrawn.
pub fn withdrawn_text(reason: WithdrawReason) -> &'static str {
    match reason {
        WithdrawReason::Answered => "Answered elsewhere.",
        WithdrawReason::Timeout => "⌛ Timed out: nobody answered in time.",
        WithdrawReason::Withdrawn => "Withdrawn by the agent.",
        WithdrawReason::ProducerGone => "The agent went away.",
        WithdrawReason::Shutdown => "askbusd shut down.",
    }
}

/// `s` with its first letter upper-case ("telegram" → "Telegram").
pub fn title_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisibles_become_visible() {
        assert_eq!(
            clean("a\u{202E}b\u{200B}c\u{1b}[2J", 100),
            "a\u{FFFD}b\u{FFFD}c␛[2J"
        );
        assert_eq!(clean("one\r\ntwo", 100), "one\ntwo");
        assert_eq!(clean("abcdef", 4), "abc…");
    }

    #[test]
    fn mentions_are_inert() {
        assert_eq!(defuse_mentions("hi @everyone"), "hi @\u{2060}everyone");
    }
}
