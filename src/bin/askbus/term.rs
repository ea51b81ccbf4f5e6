//! Terminal output safety: every string that came off the bus (question text, headers, labels,
//! descriptions, placeholders, client names, correlationIds, error messages, answers) passes
//! through here before it reaches a terminal.
//!
//! Question text is written by a model, and a prompt-injected agent can put escape sequences
//! in it: OSC 52 writes the clipboard, OSC 0 sets the window title, `ESC[2J` clears the
//! screen, a C1 CSI (U+009B) does the same without an ESC, and bidi overrides (U+202E) make a
//! line read differently from what it says. A terminal cannot tell such bytes in data from
//! the ones a program means, so they are replaced here by *visible* stand-ins (never silently
//! removed: the person should see that something was there):
//!
//! - C0 controls U+0000–U+001F become the Control Pictures U+2400–U+241F (ESC → `␛`,
//!   BEL → `␇`, newline → `␊`, tab → `␉`): a caller that lays out lines itself splits on
//!   `\n` first;
//! - DEL (U+007F) becomes `␡` (U+2421);
//! - C1 controls U+0080–U+009F and the bidi controls (U+061C, U+200E, U+200F,
//!   U+202A–U+202E, U+2066–U+2069) become `�` (U+FFFD).
//!
//! Every stand-in is one column wide, so layouts measured after sanitizing stay right.
//!
//! JSON printed for people and scripts alike (`--json`) keeps its value exactly: [`json`]
//! writes the same characters as `\uXXXX` escapes (serde escapes C0 itself, but passes DEL,
//! C1 and bidi controls through raw).

use std::borrow::Cow;

/// The stand-in for C1 and bidi controls (the Unicode replacement character).
pub const REPLACEMENT: char = '\u{FFFD}';

/// Whether `c` must not reach a terminal as it is.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// The Unicode bidirectional formatting characters (marks, embeddings, overrides, isolates).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// The visible stand-in for an unsafe character (see the module docs).
pub fn stand_in(c: char) -> char {
    match c {
        '\0'..='\u{1F}' => char::from_u32(0x2400 + c as u32).unwrap_or(REPLACEMENT),
        '\u{7F}' => '\u{2421}',
        _ => REPLACEMENT,
    }
}

/// `s` with every control character (C0, DEL, C1) and bidi control replaced by a visible
/// stand-in. Borrows when there is nothing to replace (the common case).
pub fn sanitize(s: &str) -> Cow<'_, str> {
    let Some(first) = s.find(is_unsafe) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        out.push(if is_unsafe(c) { stand_in(c) } else { c });
    }
    Cow::Owned(out)
}

/// [`sanitize`] for multi-line text a caller prints as lines: each line is sanitized on its
/// own and the newlines are kept (a `\r` or any other control still shows as a stand-in).
pub fn sanitize_lines(s: &str) -> Cow<'_, str> {
    if !s.contains(|c: char| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<str>> = s.split('\n').map(sanitize).collect();
    Cow::Owned(lines.join("\n"))
}

/// JSON text (as serde_json writes it) with every unsafe character that serde leaves raw
/// (DEL, C1, bidi controls) written as a `\uXXXX` escape: the same JSON value, safe to print.
/// Such characters can only appear inside JSON strings, where the escape means the same.
/// C0 controls are left alone: serde escapes them inside strings, and outside strings they
/// are the pretty printer's own newlines and indentation.
pub fn json(text: &str) -> Cow<'_, str> {
    let raw_in_json = |c: char| c >= '\u{7f}' && is_unsafe(c);
    let Some(first) = text.find(raw_in_json) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if raw_in_json(c) {
            // All of these are in the Basic Multilingual Plane: one escape each.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for s in ["", "Which database?", "日本語 ✓ 🐻‍❄️", "a → b", "tab-free"] {
            assert!(matches!(sanitize(s), Cow::Borrowed(t) if t == s));
            assert!(matches!(json(s), Cow::Borrowed(t) if t == s));
        }
    }

    #[test]
    fn escape_sequences_are_neutralised_visibly() {
        // OSC 52 (clipboard), OSC 0 (title), CSI 2J (clear), BEL, 8-bit CSI, RLO.
        let attacks = [
            ("\x1b]52;c;aGVsbG8=\x07", "␛]52;c;aGVsbG8=␇"),
            ("\x1b]0;pwned\x1b\\", "␛]0;pwned␛\\"),
            ("\x1b[2J", "␛[2J"),
            ("ding\x07", "ding␇"),
            ("\u{9b}2J", "\u{FFFD}2J"),
            ("abc\u{202E}fdp.exe", "abc\u{FFFD}fdp.exe"),
            ("a\r\nb\tc\0", "a␍␊b␉c␀"),
            ("del\x7f", "del␡"),
        ];
        for (input, want) in attacks {
            assert_eq!(sanitize(input), want, "{input:?}");
        }
    }

    #[test]
    fn every_unsafe_character_is_replaced_and_nothing_else() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s = c.to_string();
            let out = sanitize(&s);
            let controls = c.is_control()
                || matches!(c as u32, 0x61C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069);
            if controls {
                let r = out.chars().next().unwrap();
                assert_eq!(out.chars().count(), 1);
                assert!(!is_unsafe(r), "{c:?} became {r:?}");
                assert_ne!(r, c);
            } else {
                assert_eq!(out, s);
            }
        }
    }

    #[test]
    fn lines_keep_their_newlines() {
        assert_eq!(sanitize_lines("one\ntwo"), "one\ntwo");
        assert_eq!(sanitize_lines("a\x1b[2J\nb\r"), "a␛[2J\nb␍");
    }

    #[test]
    fn json_escapes_keep_the_value() {
        let v = serde_json::json!({"q": "a\u{9b}2J\u{202E}b\x7f\x1b]52;c;x\x07", "n": 1});
        for text in [
            serde_json::to_string(&v).unwrap(),
            serde_json::to_string_pretty(&v).unwrap(),
        ] {
            let safe = json(&text);
            assert!(!safe.contains(|c| c != '\n' && is_unsafe(c)), "{safe}");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
        }
    }
}
