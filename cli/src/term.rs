//! The one neutralizer: every string that came off the bus (question text, headers, labels,
//! descriptions, placeholders, client names, correlationIds, error messages, answers) passes
//! through here before it leaves askbus for a terminal, a desktop notification (summary, body
//! and every action button's label), a push (ntfy, webhook, Slack) or a chat message. Chat
//! sinks add only their platform's markup escaping on top.
//!
//! Question text is written by a model, and a prompt-injected agent can put escape sequences
//! in it: OSC 52 writes the clipboard, OSC 0 sets the window title, `ESC[2J` clears the
//! screen, a C1 CSI (U+009B) does the same without an ESC, bidi overrides (U+202E) make a
//! line read differently from what it says, and invisible characters (a zero-width space in
//! a host name, a run of Unicode tag characters carrying hidden ASCII) make two different
//! commands look the same. A terminal cannot tell such bytes in data from the ones a program
//! means, so they are replaced here by *visible* stand-ins (never silently removed: the
//! person should see that something was there):
//!
//! - C0 controls U+0000–U+001F become the Control Pictures U+2400–U+241F (ESC → `␛`,
//!   BEL → `␇`, newline → `␊`, tab → `␉`): a caller that lays out lines itself splits on
//!   `\n` first;
//! - DEL (U+007F) becomes `␡` (U+2421);
//! - C1 controls U+0080–U+009F, the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E,
//!   U+2066–U+2069), the line and paragraph separators (U+2028, U+2029) and the invisible
//!   characters ([`is_invisible`]: zero-width space, word joiner, BOM, soft hyphen, tags,
//!   fillers…) become `�` (U+FFFD). Two exceptions keep emoji and Indic scripts intact: a
//!   zero-width joiner or non-joiner between two non-ASCII characters (🐻‍❄️), and tag
//!   characters that follow a black flag (🏴 subdivision flags), are kept.
//!
//! Every stand-in is one column wide, so layouts measured after sanitizing stay right.
//!
//! JSON printed for people and scripts alike (`--json`) keeps its value exactly: [`json`]
//! writes the same characters as `\uXXXX` escapes (serde escapes C0 itself, but passes DEL,
//! C1, bidi and invisible characters through raw).

use std::borrow::Cow;

/// The stand-in for C1 and bidi controls (the Unicode replacement character).
pub const REPLACEMENT: char = '\u{FFFD}';

/// Whether `c` must not reach a terminal as it is (in any context: see [`sanitize`] for the
/// joiners kept between non-ASCII characters).
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_invisible(c)
}

/// Characters that show as nothing (or as blank space) yet change what a string is: format
/// characters, fillers, separators that some terminals take as line breaks.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' // soft hyphen
            | '\u{034F}' // combining grapheme joiner
            | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' // Hangul fillers
            | '\u{17B4}' | '\u{17B5}' // Khmer inherent vowels
            | '\u{180B}'..='\u{180F}' // Mongolian variation selectors, vowel separator
            | '\u{200B}'..='\u{200D}' // zero-width space, non-joiner, joiner
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{2060}'..='\u{2065}' // word joiner, invisible operators
            | '\u{206A}'..='\u{206F}' // deprecated format characters
            | '\u{FEFF}' // zero-width no-break space (BOM)
            | '\u{FFF9}'..='\u{FFFB}' // interlinear annotation
            | '\u{1D173}'..='\u{1D17A}' // musical formatting
            | '\u{E0000}'..='\u{E007F}' // tags (hidden ASCII)
            | '\u{E0100}'..='\u{E01EF}' // variation selectors supplement
    )
}

/// A joiner between two non-ASCII characters (emoji sequences, Indic conjuncts) or a tag
/// character in a flag's tag sequence: legitimate, and kept.
fn kept_in_context(prev: Option<char>, c: char, next: Option<char>) -> bool {
    let non_ascii = |x: Option<char>| x.is_some_and(|x| !x.is_ascii() && !is_unsafe(x));
    match c {
        '\u{200C}' | '\u{200D}' => non_ascii(prev) && non_ascii(next),
        '\u{E0020}'..='\u{E007F}' => {
            matches!(prev, Some('\u{1F3F4}' | '\u{E0020}'..='\u{E007F}'))
        }
        _ => false,
    }
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
    // What the input had before the current character (a kept tag follows a kept tag).
    let mut prev = s[..first].chars().next_back();
    let mut rest = s[first..].chars().peekable();
    while let Some(c) = rest.next() {
        let keep = !is_unsafe(c) || kept_in_context(prev, c, rest.peek().copied());
        let shown = if keep { c } else { stand_in(c) };
        out.push(shown);
        // A tag sequence is kept only while it is unbroken from its flag.
        prev = Some(shown);
    }
    if out == s {
        return Cow::Borrowed(s);
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
    let mut prev = text[..first].chars().next_back();
    let mut rest = text[first..].chars().peekable();
    while let Some(c) = rest.next() {
        if raw_in_json(c) && !kept_in_context(prev, c, rest.peek().copied()) {
            // JSON escapes UTF-16 code units: a tag character is a surrogate pair.
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
            prev = Some(REPLACEMENT);
        } else {
            out.push(c);
            prev = Some(c);
        }
    }
    if out == text {
        return Cow::Borrowed(text);
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
                || matches!(c as u32, 0x61C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069)
                || is_invisible(c);
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
    fn invisible_characters_show_but_emoji_and_flags_stay_whole() {
        let attacks = [
            // A zero-width space in a host name, a word joiner, a BOM, a soft hyphen.
            ("curl evil\u{200B}.example", "curl evil\u{FFFD}.example"),
            ("rm\u{2060} -rf\u{FEFF}", "rm\u{FFFD} -rf\u{FFFD}"),
            ("pay\u{00AD}pal", "pay\u{FFFD}pal"),
            // Joiners between ASCII letters hide nothing legitimate.
            ("a\u{200D}b\u{200C}c", "a\u{FFFD}b\u{FFFD}c"),
            // Tag characters smuggling "hi" after ordinary text.
            ("ok\u{E0068}\u{E0069}", "ok\u{FFFD}\u{FFFD}"),
            ("\u{200B}\u{E0068}\u{E0069}", "\u{FFFD}\u{FFFD}\u{FFFD}"),
            ("line\u{2028}sep", "line\u{FFFD}sep"),
            ("\u{3164}", "\u{FFFD}"),
        ];
        for (input, want) in attacks {
            assert_eq!(sanitize(input), want, "{input:?}");
            let j = json(&serde_json::to_string(input).unwrap()).into_owned();
            assert!(!j.contains(|c: char| is_unsafe(c)), "{j}");
            assert_eq!(serde_json::from_str::<String>(&j).unwrap(), input);
        }
        // Emoji ZWJ sequences, Indic conjuncts and subdivision flags are kept whole.
        for s in [
            "🐻\u{200D}❄\u{FE0F}",
            "👩\u{200D}💻",
            "क्\u{200D}ष",
            "\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
        ] {
            assert!(matches!(sanitize(s), Cow::Borrowed(t) if t == s), "{s:?}");
            assert!(matches!(json(s), Cow::Borrowed(t) if t == s), "{s:?}");
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
