//! What a request showed the person who answers it, as one digest: `shownSha256`, the SHA-256
//! (lower-case hex) of the RFC 8785 (JCS) canonical JSON of
//! `{"correlationId", "kind": "question", "questions", "context"?}` for a question (the
//! questions as normalized, i.e. as every UI receives them) or
//! `{"correlationId", "kind": "approval", "toolCall", "details"?, "context"?}` for an approval,
//! absent members left out (never `null`), and nothing that changes while the request waits
//! (`timeoutMs`) or that is not shown as the request (`producer`, `node`).
//!
//! Signed links, chat callbacks and the history all bind to this one digest: an answer given
//! for what was shown can never be applied to another request that reuses the correlationId.
//! The canonical text ([`canonical_json`], [`shown_json`]) needs nothing but serde_json; the
//! digest itself ([`shown_sha256`]) is behind the `shown` feature, so an agent that never
//! checks one does not compile a hash.
//!
//! JCS (RFC 8785) in short: no whitespace; object members sorted by their names' UTF-16 code
//! units; strings with only `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` and lower-case `\u00xx`
//! for the other controls escaped (everything else as UTF-8); numbers as ECMAScript's
//! `Number.prototype.toString` writes the IEEE double they denote (so `1.0` is `1`, `1e-7`
//! is `1e-7`, and an integer beyond 2^53 is rounded as JavaScript would read it).

use serde_json::{Map, Value};

use super::frames::RequestContext;
use super::json::write_str;

/// What a request showed, borrowed from wherever it is kept.
#[derive(Debug, Clone, Copy)]
pub enum Shown<'a> {
    /// An `ask-user-request`: its normalized questions.
    Question {
        correlation_id: &'a str,
        questions: &'a Value,
        context: Option<&'a RequestContext>,
    },
    /// A `tool-confirmation-request`: the tool call and its details.
    Approval {
        correlation_id: &'a str,
        tool_call: &'a Value,
        details: Option<&'a Value>,
        context: Option<&'a RequestContext>,
    },
}

impl<'a> Shown<'a> {
    /// The object the digest is taken of (members in any order: [`canonical_json`] sorts).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let context = match *self {
            Shown::Question {
                correlation_id,
                questions,
                context,
            } => {
                m.insert("correlationId".into(), correlation_id.into());
                m.insert("kind".into(), "question".into());
                m.insert("questions".into(), questions.clone());
                context
            }
            Shown::Approval {
                correlation_id,
                tool_call,
                details,
                context,
            } => {
                m.insert("correlationId".into(), correlation_id.into());
                m.insert("kind".into(), "approval".into());
                m.insert("toolCall".into(), tool_call.clone());
                if let Some(d) = details {
                    m.insert("details".into(), d.clone());
                }
                context
            }
        };
        if let Some(c) = context.filter(|c| !c.is_empty()) {
            m.insert(
                "context".into(),
                serde_json::to_value(c).expect("a context serializes"),
            );
        }
        Value::Object(m)
    }
}

impl super::UiRequest {
    /// What this question showed.
    pub fn shown(&self) -> Shown<'_> {
        Shown::Question {
            correlation_id: &self.correlation_id,
            questions: &self.questions,
            context: self.context.as_deref(),
        }
    }
}

impl super::UiApproval {
    /// What this approval showed.
    pub fn shown(&self) -> Shown<'_> {
        Shown::Approval {
            correlation_id: &self.correlation_id,
            tool_call: &self.tool_call,
            details: self.details.as_ref(),
            context: self.context.as_ref(),
        }
    }
}

/// The JCS text of what `shown` showed: the bytes [`shown_sha256`] hashes.
pub fn shown_json(shown: &Shown<'_>) -> String {
    canonical_json(&shown.to_value())
}

/// `shownSha256`: the SHA-256 of [`shown_json`], as 64 lower-case hex digits.
#[cfg(feature = "shown")]
pub fn shown_sha256(shown: &Shown<'_>) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(shown_json(shown).as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// `value` as RFC 8785 (JCS) canonical JSON.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write(&mut out, value);
    String::from_utf8(out).expect("written from strs")
}

/// serde_json's string escapes are JCS's (RFC 8785 §3.2.2.2), so its writer is shared.
fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, v);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            // RFC 8785 §3.2.3: by the names' UTF-16 code units, not by code points (they
            // differ above U+FFFF against U+E000–U+FFFF).
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write(out, v);
            }
            out.push(b'}');
        }
    }
}

/// Integers within ±2^53 are exact doubles and print as themselves; anything else is the
/// double it denotes, printed as ECMAScript does.
fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    const EXACT: u64 = 1 << 53;
    let text = if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        u.to_string()
    } else if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        i.to_string()
    } else {
        es_number(n.as_f64().unwrap_or(0.0))
    };
    out.extend_from_slice(text.as_bytes());
}

/// ECMAScript's `Number.prototype.toString(x)` for a finite double (ECMA-262 §6.1.6.1.20),
/// from Rust's shortest round-trip digits.
pub fn es_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        // -0 prints as 0; JSON has no NaN or Infinity (serde_json never holds them).
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // `{:e}` gives the shortest digits that round-trip: "1.2345e-7", "5e0".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} writes an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    // The decimal point sits after `n` digits: value = 0.digits × 10^n.
    let n = exp.parse::<i32>().expect("an integer exponent") + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e >= 0 {
            format!("+{e}")
        } else {
            e.to_string()
        };
        if k == 1 {
            format!("{digits}e{e}")
        } else {
            format!("{}.{}e{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_as_ecmascript_does() {
        // From RFC 8785 Appendix B and ECMA-262's rules.
        for (x, want) in [
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.5, "0.5"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (123e-9, "1.23e-7"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (333_333_333.333_333_3, "333333333.3333333"),
            (4.50, "4.5"),
            (2e-3, "0.002"),
            (0.000001234, "0.000001234"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740994.0, "9007199254740994"),
            (-0.0, "0"),
            (295147905179352830000.0, "295147905179352830000"),
        ] {
            assert_eq!(es_number(x), want, "{x:e}");
        }
        assert_eq!(canonical_json(&json!(u64::MAX)), "18446744073709552000");
        assert_eq!(
            canonical_json(&json!(-9007199254740993i64)),
            "-9007199254740992"
        );
        assert_eq!(
            canonical_json(&json!(9007199254740992u64)),
            "9007199254740992"
        );
    }

    #[test]
    fn members_sort_by_utf16_and_strings_escape_minimally() {
        // RFC 8785 §3.2.3's example: by UTF-16 code units, U+1F600 (a surrogate pair, 0xD83D)
        // sorts before U+FB33 (0xFB33) though its code point is larger.
        let v = json!({"\u{20ac}": "Euro Sign", "\r": "Carriage Return", "\u{fb33}": "Hebrew Letter Dalet With Dagesh", "1": "One", "\u{1f600}": "Emoji: Grinning Face", "\u{0080}": "Control", "\u{00f6}": "Latin Small Letter O With Diaeresis"});
        assert_eq!(
            canonical_json(&v),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        assert_eq!(
            canonical_json(&json!([
                "\u{1}\u{1f}\"\\/\u{7f}\u{2028}",
                [],
                {},
                null,
                true
            ])),
            "[\"\\u0001\\u001f\\\"\\\\/\u{7f}\u{2028}\",[],{},null,true]"
        );
    }

    #[test]
    fn the_shown_object_leaves_out_what_changes_and_what_is_absent() {
        let q = json!([{"question": "Go?", "header": "Go", "type": "yesno"}]);
        let shown = Shown::Question {
            correlation_id: "c1",
            questions: &q,
            context: None,
        };
        assert_eq!(
            shown_json(&shown),
            r#"{"correlationId":"c1","kind":"question","questions":[{"header":"Go","question":"Go?","type":"yesno"}]}"#
        );
        let ctx = RequestContext {
            agent: Some("a/1".into()),
            ..Default::default()
        };
        let call = json!({"name": "shell", "args": {"command": "ls"}});
        let shown = Shown::Approval {
            correlation_id: "c2",
            tool_call: &call,
            details: None,
            context: Some(&ctx),
        };
        assert_eq!(
            shown_json(&shown),
            r#"{"context":{"agent":"a/1"},"correlationId":"c2","kind":"approval","toolCall":{"args":{"command":"ls"},"name":"shell"}}"#
        );
        // An empty context is no context.
        let empty = RequestContext::default();
        let with_empty = Shown::Question {
            correlation_id: "c1",
            questions: &q,
            context: Some(&empty),
        };
        assert!(!shown_json(&with_empty).contains("context"));
    }
}
