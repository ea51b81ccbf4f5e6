//! Reading JSON text that is already canonical: exactly the bytes serde_json (with
//! `preserve_order`) writes for the value it holds. The fast paths keep such text as it came
//! (an approval's `toolCall` and `details` are copied into every UI's frame) instead of
//! building a `Value` and writing it out again, which gives these very bytes.
//!
//! Canonical means: no whitespace outside strings; strings with only the escapes serde_json
//! writes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, and `\u00xx` in lower case for the other
//! control characters); integers without a sign on zero, leading zeros, fraction or exponent,
//! within an `i64` (negative) or a `u64`; objects without a repeated key (a `Value` keeps one of
//! them). Anything else (floats too: serde_json rewrites `1e2` as `100.0`) is "not sure", and
//! the caller falls back to the reference path. The scanner is strict, so it also refuses text
//! that is not JSON at all.

use super::json::any_escape;

/// Deepest nesting read: well inside serde_json's own limit (128) for the frame the text is
/// part of, so nothing taken here is refused there as too deep.
const MAX_DEPTH: usize = 100;

/// An object with more keys than this is left to the reference: the repeated-key check is
/// quadratic.
const MAX_KEYS: usize = 64;

/// Integers of up to this many digits fit an `i64` (and a `u64`) whatever the digits; longer
/// ones are checked against the range.
const MAX_DIGITS: usize = 18;

/// What a canonical value is, by its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    /// The kind of the (canonical, non-empty) value `text`.
    pub fn of(text: &str) -> Kind {
        match text.as_bytes().first() {
            Some(b'n') => Kind::Null,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'"') => Kind::String,
            Some(b'[') => Kind::Array,
            Some(b'{') => Kind::Object,
            _ => Kind::Number,
        }
    }
}

/// Whether `text` is one JSON value written exactly as serde_json would write it.
pub fn is_canonical(text: &str) -> bool {
    let b = text.as_bytes();
    let mut at = 0;
    value(b, &mut at, 0) && at == b.len()
}

/// The members of `text`, a canonical JSON object: each key as written between its quotes
/// (escapes kept) and its value's text, in order. `None` if `text` is not a canonical object.
pub fn members(text: &str) -> Option<Vec<(&str, &str)>> {
    let b = text.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 1;
    if b.get(at) == Some(&b'}') {
        return (at + 1 == b.len()).then_some(out);
    }
    loop {
        let key_start = at;
        if !string(b, &mut at) || b.get(at) != Some(&b':') {
            return None;
        }
        let key = &text[key_start + 1..at - 1];
        if out.len() >= MAX_KEYS || out.iter().any(|(k, _)| *k == key) {
            return None;
        }
        at += 1;
        let value_start = at;
        if !value(b, &mut at, 1) {
            return None;
        }
        out.push((key, &text[value_start..at]));
        match b.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => return (at + 1 == b.len()).then_some(out),
            _ => return None,
        }
    }
}

/// The elements of `text`, a canonical JSON array. `None` if it is not one.
pub fn elements(text: &str) -> Option<Vec<&str>> {
    let b = text.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut at = 1;
    if b.get(at) == Some(&b']') {
        return (at + 1 == b.len()).then_some(out);
    }
    loop {
        let start = at;
        if !value(b, &mut at, 1) {
            return None;
        }
        out.push(&text[start..at]);
        match b.get(at) {
            Some(b',') => at += 1,
            Some(b']') => return (at + 1 == b.len()).then_some(out),
            _ => return None,
        }
    }
}

/// The content of `text`, a canonical JSON string without escapes; `None` for anything else
/// (a string with escapes needs unescaping: the caller reads it with serde).
pub fn plain_str(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains(['\\', '"'])).then_some(inner)
}

fn value(b: &[u8], at: &mut usize, depth: usize) -> bool {
    if depth >= MAX_DEPTH {
        return false;
    }
    match b.get(*at) {
        Some(b'{') => object(b, at, depth + 1),
        Some(b'[') => array(b, at, depth + 1),
        Some(b'"') => string(b, at),
        Some(b't') => literal(b, at, b"true"),
        Some(b'f') => literal(b, at, b"false"),
        Some(b'n') => literal(b, at, b"null"),
        Some(b'-' | b'0'..=b'9') => integer(b, at),
        _ => false,
    }
}

fn literal(b: &[u8], at: &mut usize, word: &[u8]) -> bool {
    let ok = b[*at..].starts_with(word);
    *at += word.len();
    ok
}

fn integer(b: &[u8], at: &mut usize) -> bool {
    if b[*at] == b'-' {
        *at += 1;
    }
    let start = *at;
    while b.get(*at).is_some_and(u8::is_ascii_digit) {
        *at += 1;
    }
    let digits = &b[start..*at];
    let negative = start > 0 && b[start - 1] == b'-';
    let canonical = match digits {
        [] => false,
        // `0` alone; `-0` is read as the float -0.0 and written `-0.0`.
        [b'0'] => !negative,
        [b'0', ..] => false,
        _ if digits.len() <= MAX_DIGITS => true,
        // Past an i64 (negative) or a u64, serde_json reads a float.
        _ => {
            let limit = if negative {
                1u128 << 63
            } else {
                u64::MAX as u128
            };
            digits.len() <= 20
                && digits
                    .iter()
                    .fold(0u128, |n, d| n * 10 + u128::from(d - b'0'))
                    <= limit
        }
    };
    canonical && !matches!(b.get(*at), Some(b'.' | b'e' | b'E'))
}

/// A string from its opening quote; `at` ends past its closing quote.
fn string(b: &[u8], at: &mut usize) -> bool {
    if b.get(*at) != Some(&b'"') {
        return false;
    }
    let mut i = *at + 1;
    loop {
        if let Some(chunk) = b.get(i..i + 8) {
            if !any_escape(u64::from_le_bytes(chunk.try_into().expect("eight bytes"))) {
                i += 8;
                continue;
            }
        }
        match b.get(i) {
            None => return false,
            Some(b'"') => {
                *at = i + 1;
                return true;
            }
            Some(b'\\') => {
                let ok = match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        i += 2;
                        true
                    }
                    Some(b'u') => {
                        let ok = control_escape(b.get(i + 2..i + 6));
                        i += 6;
                        ok
                    }
                    _ => false,
                };
                if !ok {
                    return false;
                }
            }
            Some(c) if *c < 0x20 => return false,
            Some(_) => i += 1,
        }
    }
}

/// `\u00xx` as serde_json writes it: a control character without a short escape, lower case.
fn control_escape(hex: Option<&[u8]>) -> bool {
    const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";
    let Some([b'0', b'0', hi, lo]) = hex else {
        return false;
    };
    let (Some(hi), Some(lo)) = (
        LOWER_HEX.iter().position(|c| c == hi),
        LOWER_HEX.iter().position(|c| c == lo),
    ) else {
        return false;
    };
    let c = hi * 16 + lo;
    c < 0x20 && !matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
}

fn object(b: &[u8], at: &mut usize, depth: usize) -> bool {
    *at += 1;
    if b.get(*at) == Some(&b'}') {
        *at += 1;
        return true;
    }
    let mut keys: Vec<&[u8]> = Vec::new();
    loop {
        let start = *at;
        if !string(b, at) || b.get(*at) != Some(&b':') {
            return false;
        }
        let key = &b[start..*at];
        if keys.len() >= MAX_KEYS || keys.contains(&key) {
            return false;
        }
        keys.push(key);
        *at += 1;
        if !value(b, at, depth) {
            return false;
        }
        match b.get(*at) {
            Some(b',') => *at += 1,
            Some(b'}') => {
                *at += 1;
                return true;
            }
            _ => return false,
        }
    }
}

fn array(b: &[u8], at: &mut usize, depth: usize) -> bool {
    *at += 1;
    if b.get(*at) == Some(&b']') {
        *at += 1;
        return true;
    }
    loop {
        if !value(b, at, depth) {
            return false;
        }
        match b.get(*at) {
            Some(b',') => *at += 1,
            Some(b']') => {
                *at += 1;
                return true;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The reference: what serde_json writes back for the value `text` holds.
    fn rewritten(text: &str) -> Option<String> {
        let v: Value = serde_json::from_str(text).ok()?;
        Some(serde_json::to_string(&v).unwrap())
    }

    /// Canonical only where serde_json writes the text back unchanged.
    fn agrees(text: &str) -> bool {
        let canonical = is_canonical(text);
        if canonical {
            assert_eq!(rewritten(text).as_deref(), Some(text), "{text}");
        }
        canonical
    }

    #[test]
    fn takes_what_serde_json_writes() {
        for text in [
            r#"{"name":"run_shell_command","args":{"command":"ls -la","n":[1,-2,0,true,false,null]}}"#,
            r#"{}"#,
            r#"[]"#,
            r#""""#,
            r#"{"a":{"b":{"c":[[],{}]}}}"#,
            r#""tab\there \"quoted\" back\\slash \b\f\n\r \u0000\u001f é 🎉""#,
            "\"\u{7f}\"",
            "123456789012345678",
            "-123456789012345678",
            "18446744073709551615",
            "-9223372036854775808",
            r#"{"z":1,"a":2}"#,
        ] {
            assert!(agrees(text), "{text}");
        }
    }

    #[test]
    fn leaves_everything_serde_json_would_rewrite() {
        for text in [
            r#"{ "a":1}"#,
            r#"{"a": 1}"#,
            " {}",
            "{} ",
            "[1, 2]",
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#""\/""#,
            r#""\u0041""#,
            r#""\u007f""#,
            r#""\u000a""#,
            r#""\u001F""#,
            r#""\ud83d\ude00""#,
            "1.0",
            "1e2",
            "1E2",
            "-0",
            "01",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901",
            "\"a\u{1}\"",
            "tru",
            "nul",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{"a"}"#,
            "",
            "\"abc",
        ] {
            assert!(!agrees(text), "{text}");
        }
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(agrees(&nested(MAX_DEPTH)));
        assert!(!agrees(&nested(MAX_DEPTH + 1)));
    }

    #[test]
    fn members_and_elements_split_canonical_text() {
        let m = members(r#"{"a":1,"b\n":{"c":[2]},"d":"x"}"#).unwrap();
        assert_eq!(
            m,
            vec![("a", "1"), ("b\\n", r#"{"c":[2]}"#), ("d", r#""x""#)]
        );
        assert_eq!(members("{}").unwrap(), vec![]);
        assert_eq!(members(r#"{"a":1,"a":1}"#), None);
        assert_eq!(members(r#"{"a": 1}"#), None);
        assert_eq!(members("[]"), None);
        assert_eq!(members(r#"{"a":1}x"#), None);
        let e = elements(r#"["a",{"b":1},[]]"#).unwrap();
        assert_eq!(e, vec![r#""a""#, r#"{"b":1}"#, "[]"]);
        assert_eq!(elements("[]").unwrap(), Vec::<&str>::new());
        assert_eq!(elements("[1 ]"), None);
        assert_eq!(plain_str(r#""abc""#), Some("abc"));
        assert_eq!(plain_str(r#""a\nb""#), None);
        assert_eq!(Kind::of("-1"), Kind::Number);
        assert_eq!(Kind::of("false"), Kind::Bool);
    }

    #[test]
    fn random_text_is_canonical_only_where_serde_json_agrees() {
        let pieces = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"a\"",
            "\"b\"",
            "1",
            "-0",
            "0",
            "1.5",
            "null",
            "true",
            " ",
            "\"\\n\"",
            "\"\\u0001\"",
            "\"\\u0041\"",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut taken = 0;
        for _ in 0..20_000 {
            let mut text = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 9) as usize + 1;
            for i in 0..len {
                text.push_str(pieces[((seed >> (i * 5)) % pieces.len() as u64) as usize]);
            }
            if agrees(&text) {
                taken += 1;
            }
        }
        assert!(taken > 20, "{taken}");
    }
}
