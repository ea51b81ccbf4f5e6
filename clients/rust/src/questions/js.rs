//! The few JavaScript string semantics the reference's output depends on.

/// Whether `c` is one of the code points `String.prototype.trim` strips: ECMAScript's
/// WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP/BOM, and Unicode Zs) plus LineTerminator
/// (LF, CR, LS, PS). Rust's `char::is_whitespace` differs: it also strips U+0085 (NEL) and
/// keeps U+FEFF. The set matches what Node 20 strips (checked over every code point).
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// `String.prototype.trim`, exactly.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// JavaScript's `.length` of `s`: UTF-16 code units, so an astral character counts 2.
pub fn js_utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}
