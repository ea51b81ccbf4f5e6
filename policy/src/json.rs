//! Tool-call arguments as JavaScript sees them: `JSON.parse`, `JSON.stringify`, and the
//! reference's `stableStringify` (the text every `argsPattern` is matched against).
//!
//! Strings are kept as UTF-16 code units because that is what the reference's regular
//! expressions see (a lone surrogate from `"\ud800"` survives `JSON.parse`); numbers are
//! binary64, as `JSON.parse` makes them, and print as `Number.prototype.toString` does
//! (`1.0` → `1`, `1e21` → `1e+21`).

use std::fmt::Write as _;

/// A JSON value with JavaScript semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum JsValue {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number (binary64; `1e400` is `Infinity`).
    Number(f64),
    /// A string, in UTF-16 code units.
    String(Vec<u16>),
    /// An array.
    Array(Vec<JsValue>),
    /// An object: keys in first-insertion order, the last duplicate's value.
    Object(Vec<(Vec<u16>, JsValue)>),
}

/// `JSON.parse` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at position {0}")]
pub struct JsonError(pub usize);

impl JsValue {
    /// A string value from Rust text.
    pub fn str(s: &str) -> JsValue {
        JsValue::String(s.encode_utf16().collect())
    }

    /// JavaScript truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            JsValue::Null => false,
            JsValue::Bool(b) => *b,
            JsValue::Number(n) => !(*n == 0.0 || n.is_nan()),
            JsValue::String(s) => !s.is_empty(),
            JsValue::Array(_) | JsValue::Object(_) => true,
        }
    }

    /// An own property of an object (`obj[key]`, for objects only; `None` is `undefined`).
    pub fn prop(&self, key: &str) -> Option<&JsValue> {
        match self {
            JsValue::Object(entries) => {
                let k: Vec<u16> = key.encode_utf16().collect();
                entries.iter().find(|(ek, _)| *ek == k).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    /// `value[key]` for any value: objects' own keys, arrays' and strings' indexes and `length`.
    /// Inherited properties (functions) are reported as `Some(None)`: defined, but equal to
    /// nothing a policy file can write.
    pub fn js_get(&self, key: &[u16]) -> JsProp<'_> {
        let key_s = String::from_utf16_lossy(key);
        match self {
            JsValue::Object(entries) => {
                if let Some((_, v)) = entries.iter().find(|(ek, _)| ek == key) {
                    return JsProp::Value(v);
                }
                if OBJECT_PROTOTYPE.contains(&key_s.as_str()) {
                    return JsProp::Opaque;
                }
                JsProp::Undefined
            }
            JsValue::Array(items) => {
                if key_s == "length" {
                    return JsProp::Number(items.len() as f64);
                }
                match array_index(&key_s) {
                    Some(i) if i < items.len() => JsProp::Value(&items[i]),
                    _ if OBJECT_PROTOTYPE.contains(&key_s.as_str()) => JsProp::Opaque,
                    _ => JsProp::Undefined,
                }
            }
            JsValue::String(s) => {
                if key_s == "length" {
                    return JsProp::Number(s.len() as f64);
                }
                match array_index(&key_s) {
                    Some(i) if i < s.len() => JsProp::Char(s[i]),
                    _ => JsProp::Undefined,
                }
            }
            _ => JsProp::Undefined,
        }
    }

    /// The string, if this is one, as Rust text (lone surrogates replaced).
    pub fn as_string(&self) -> Option<String> {
        match self {
            JsValue::String(s) => Some(String::from_utf16_lossy(s)),
            _ => None,
        }
    }

    /// `typeof value === 'object' && value !== null && !Array.isArray(value)`.
    pub fn is_record(&self) -> bool {
        matches!(self, JsValue::Object(_))
    }
}

/// The result of a property read.
#[derive(Debug, Clone, Copy)]
pub enum JsProp<'a> {
    /// `undefined`.
    Undefined,
    /// A JSON value.
    Value(&'a JsValue),
    /// A number that is not stored (`length`).
    Number(f64),
    /// One UTF-16 unit of a string, as a one-unit string.
    Char(u16),
    /// A function inherited from `Object.prototype`: equal to no policy value.
    Opaque,
}

const OBJECT_PROTOTYPE: &[&str] = &[
    "constructor",
    "__proto__",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

fn array_index(s: &str) -> Option<usize> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

/// `JSON.parse(text)`.
pub fn parse(text: &str) -> Result<JsValue, JsonError> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut p = JsonParser {
        s: &units,
        i: 0,
        depth: 0,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != units.len() {
        return Err(JsonError(p.i));
    }
    Ok(v)
}

struct JsonParser<'a> {
    s: &'a [u16],
    i: usize,
    depth: usize,
}

impl JsonParser<'_> {
    fn peek(&self) -> Option<u16> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(0x20 | 0x09 | 0x0A | 0x0D)) {
            self.i += 1;
        }
    }
    fn lit(&mut self, word: &str, v: JsValue) -> Result<JsValue, JsonError> {
        for b in word.bytes() {
            if self.peek() != Some(u16::from(b)) {
                return Err(JsonError(self.i));
            }
            self.i += 1;
        }
        Ok(v)
    }
    fn value(&mut self) -> Result<JsValue, JsonError> {
        // V8 recurses too; a bound keeps hostile input from overflowing our stack.
        if self.depth > 10_000 {
            return Err(JsonError(self.i));
        }
        match self.peek() {
            Some(0x7B) => {
                self.i += 1;
                self.depth += 1;
                let mut entries: Vec<(Vec<u16>, JsValue)> = vec![];
                self.ws();
                if self.peek() == Some(0x7D) {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(JsValue::Object(entries));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(0x22) {
                        return Err(JsonError(self.i));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.peek() != Some(0x3A) {
                        return Err(JsonError(self.i));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value()?;
                    if let Some(slot) = entries.iter_mut().find(|(ek, _)| *ek == k) {
                        slot.1 = v;
                    } else {
                        entries.push((k, v));
                    }
                    self.ws();
                    match self.peek() {
                        Some(0x2C) => self.i += 1,
                        Some(0x7D) => {
                            self.i += 1;
                            self.depth -= 1;
                            return Ok(JsValue::Object(entries));
                        }
                        _ => return Err(JsonError(self.i)),
                    }
                }
            }
            Some(0x5B) => {
                self.i += 1;
                self.depth += 1;
                let mut items = vec![];
                self.ws();
                if self.peek() == Some(0x5D) {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(JsValue::Array(items));
                }
                loop {
                    self.ws();
                    items.push(self.value()?);
                    self.ws();
                    match self.peek() {
                        Some(0x2C) => self.i += 1,
                        Some(0x5D) => {
                            self.i += 1;
                            self.depth -= 1;
                            return Ok(JsValue::Array(items));
                        }
                        _ => return Err(JsonError(self.i)),
                    }
                }
            }
            Some(0x22) => Ok(JsValue::String(self.string()?)),
            Some(0x74) => self.lit("true", JsValue::Bool(true)),
            Some(0x66) => self.lit("false", JsValue::Bool(false)),
            Some(0x6E) => self.lit("null", JsValue::Null),
            Some(c) if c == 0x2D || (0x30..=0x39).contains(&c) => self.number(),
            _ => Err(JsonError(self.i)),
        }
    }
    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(0x30..=0x39)) {
            self.i += 1;
        }
        self.i - start
    }
    fn number(&mut self) -> Result<JsValue, JsonError> {
        let start = self.i;
        if self.peek() == Some(0x2D) {
            self.i += 1;
        }
        if self.peek() == Some(0x30) {
            self.i += 1;
        } else if self.digits() == 0 {
            return Err(JsonError(self.i));
        }
        if self.peek() == Some(0x2E) {
            self.i += 1;
            if self.digits() == 0 {
                return Err(JsonError(self.i));
            }
        }
        if matches!(self.peek(), Some(0x65 | 0x45)) {
            self.i += 1;
            if matches!(self.peek(), Some(0x2B | 0x2D)) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(JsonError(self.i));
            }
        }
        let text = String::from_utf16_lossy(&self.s[start..self.i]);
        let n: f64 = text.parse().map_err(|_| JsonError(start))?;
        Ok(JsValue::Number(n))
    }
    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let c = self.peek().ok_or(JsonError(self.i))?;
            let d = char::from_u32(u32::from(c))
                .and_then(|ch| ch.to_digit(16))
                .ok_or(JsonError(self.i))?;
            v = v * 16 + d as u16;
            self.i += 1;
        }
        Ok(v)
    }
    fn string(&mut self) -> Result<Vec<u16>, JsonError> {
        self.i += 1;
        let mut out = vec![];
        loop {
            let c = self.peek().ok_or(JsonError(self.i))?;
            self.i += 1;
            match c {
                0x22 => return Ok(out),
                0x5C => {
                    let e = self.peek().ok_or(JsonError(self.i))?;
                    self.i += 1;
                    match e {
                        0x22 => out.push(0x22),
                        0x5C => out.push(0x5C),
                        0x2F => out.push(0x2F),
                        0x62 => out.push(0x08),
                        0x66 => out.push(0x0C),
                        0x6E => out.push(0x0A),
                        0x72 => out.push(0x0D),
                        0x74 => out.push(0x09),
                        0x75 => out.push(self.hex4()?),
                        _ => return Err(JsonError(self.i - 1)),
                    }
                }
                c if c < 0x20 => return Err(JsonError(self.i - 1)),
                c => out.push(c),
            }
        }
    }
}

/// `Number.prototype.toString()` for a finite number (and `JSON.stringify`'s `null` otherwise).
pub fn number_to_string(n: f64) -> String {
    if !n.is_finite() {
        return if n.is_nan() {
            "NaN".into()
        } else if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if n == 0.0 {
        return "0".into();
    }
    let mut buf = ryu_js::Buffer::new();
    buf.format_finite(n).to_string()
}

/// `JSON.stringify(string)` appended to `out`, in UTF-16 units.
pub fn quote_into(s: &[u16], out: &mut Vec<u16>) {
    out.push(0x22);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            0x22 => out.extend_from_slice(&[0x5C, 0x22]),
            0x5C => out.extend_from_slice(&[0x5C, 0x5C]),
            0x08 => out.extend_from_slice(&[0x5C, 0x62]),
            0x0C => out.extend_from_slice(&[0x5C, 0x66]),
            0x0A => out.extend_from_slice(&[0x5C, 0x6E]),
            0x0D => out.extend_from_slice(&[0x5C, 0x72]),
            0x09 => out.extend_from_slice(&[0x5C, 0x74]),
            c if c < 0x20 => push_escape(c, out),
            0xD800..=0xDBFF => {
                if i + 1 < s.len() && (0xDC00..=0xDFFF).contains(&s[i + 1]) {
                    out.push(c);
                    out.push(s[i + 1]);
                    i += 1;
                } else {
                    push_escape(c, out);
                }
            }
            0xDC00..=0xDFFF => push_escape(c, out),
            c => out.push(c),
        }
        i += 1;
    }
    out.push(0x22);
}

fn push_escape(c: u16, out: &mut Vec<u16>) {
    let mut s = String::new();
    let _ = write!(s, "\\u{c:04x}");
    out.extend(s.encode_utf16());
}

fn push_str(out: &mut Vec<u16>, s: &str) {
    out.extend(s.encode_utf16());
}

/// `JSON.stringify(value)` (no spacing), in UTF-16 units.
pub fn stringify(v: &JsValue) -> Vec<u16> {
    let mut out = vec![];
    stringify_into(v, &mut out);
    out
}

fn stringify_into(v: &JsValue, out: &mut Vec<u16>) {
    match v {
        JsValue::Null => push_str(out, "null"),
        JsValue::Bool(b) => push_str(out, if *b { "true" } else { "false" }),
        JsValue::Number(n) => {
            if n.is_finite() {
                push_str(out, &number_to_string(*n))
            } else {
                push_str(out, "null")
            }
        }
        JsValue::String(s) => quote_into(s, out),
        JsValue::Array(items) => {
            out.push(0x5B);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(0x2C);
                }
                stringify_into(item, out);
            }
            out.push(0x5D);
        }
        JsValue::Object(entries) => {
            out.push(0x7B);
            for (i, (k, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(0x2C);
                }
                quote_into(k, out);
                out.push(0x3A);
                stringify_into(item, out);
            }
            out.push(0x7D);
        }
    }
}

/// The reference's `stableStringify`: keys sorted by UTF-16 code units, and the top-level
/// object's `"key":value` pairs wrapped in NUL characters (nested ones are not).
pub fn stable_stringify(v: &JsValue) -> Vec<u16> {
    let mut out = vec![];
    stable_into(v, &mut out, true);
    out
}

fn stable_into(v: &JsValue, out: &mut Vec<u16>, top: bool) {
    match v {
        JsValue::Array(items) => {
            out.push(0x5B);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(0x2C);
                }
                stable_into(item, out, false);
            }
            out.push(0x5D);
        }
        JsValue::Object(entries) => {
            let mut sorted: Vec<&(Vec<u16>, JsValue)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push(0x7B);
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(0x2C);
                }
                if top {
                    out.push(0);
                }
                quote_into(k, out);
                out.push(0x3A);
                stable_into(item, out, false);
                if top {
                    out.push(0);
                }
            }
            out.push(0x7D);
        }
        other => stringify_into(other, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stable(s: &str) -> String {
        String::from_utf16_lossy(&stable_stringify(&parse(s).unwrap()))
    }

    #[test]
    fn stable_stringify_is_the_reference_s() {
        assert_eq!(stable(r#"{"b":2,"a":1}"#), "{\0\"a\":1\0,\0\"b\":2\0}");
        assert_eq!(
            stable(r#"{"a":{"d":1.0,"c":1e21}}"#),
            "{\0\"a\":{\"c\":1e+21,\"d\":1}\0}"
        );
        assert_eq!(
            stable(r#"[{"b":1,"a":"\u2028"}]"#),
            "[{\"a\":\"\u{2028}\",\"b\":1}]"
        );
        assert_eq!(stable(r#""\ud800x""#), "\"\\ud800x\"");
        assert_eq!(stable(r#"{"a":1,"a":2}"#), "{\0\"a\":2\0}");
        assert_eq!(stable("1e400"), "null");
        assert_eq!(stable("-0"), "0");
        assert_eq!(stable("0.000001"), "0.000001");
        assert_eq!(stable("1e-7"), "1e-7");
        assert_eq!(stable("123456789012345678901234"), "1.2345678901234569e+23");
    }

    #[test]
    fn json_parse_rejects_what_v8_rejects() {
        for bad in [
            "",
            "{",
            "01",
            "1.",
            ".5",
            "[1,]",
            "{\"a\":1,}",
            "'x'",
            "\"\t\"",
            "NaN",
            "+1",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
