//! Hand-written encoders for the frames every question costs (the producer's response, the
//! winner's ack, the others' withdrawal), and a JSON string writer that skips eight bytes at a
//! time over text needing no escape. serde's derived encoders walk strings a byte at a time
//! and were the largest single cost of a round trip; these write the very same bytes (the
//! tests compare them with serde's on every shape), so nothing on the wire changes.

use bytes::Bytes;

use super::codec::encode_with;
use super::frames::{AskUserData, Outcome, ProducerResponse, WithdrawReason};

/// What serde_json writes after a backslash for each byte that needs escaping (`u`: `\u00XX`),
/// or 0 for a byte written as it is.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes of `w` is a control character, `"` or `\`. Exact (the
/// classic has-zero-byte and has-less-than tests have no false negatives or positives for
/// "any").
#[inline]
fn any_escape(w: u64) -> bool {
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * b'\\' as u64);
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGHS != 0
}

/// Appends `s` as a JSON string, exactly as serde_json writes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            if !any_escape(w) {
                i += 8;
                continue;
            }
        }
        let c = bytes[i];
        let escape = ESCAPE[c as usize];
        i += 1;
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[run..i - 1]);
        run = i;
        out.push(b'\\');
        out.push(escape);
        if escape == b'u' {
            out.extend_from_slice(&[b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 0xf) as usize]]);
        }
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// Appends `n` as serde_json writes it.
pub fn write_u64(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `n` as serde_json writes it.
pub fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
}

fn write_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// `{"type":"ask-user-withdrawn","correlationId":…,"reason":…}`
pub fn withdrawn(correlation_id: &str, reason: WithdrawReason) -> Bytes {
    id_and_word(
        br#"{"type":"ask-user-withdrawn","correlationId":"#,
        correlation_id,
        br#","reason":""#,
        reason.as_str(),
    )
}

/// `{"type":"ask-user-ack","correlationId":…,"outcome":…}`
pub fn ack(correlation_id: &str, outcome: Outcome) -> Bytes {
    id_and_word(
        br#"{"type":"ask-user-ack","correlationId":"#,
        correlation_id,
        br#","outcome":""#,
        outcome.as_str(),
    )
}

/// A frame of a correlationId and one word that needs no escaping (a reason, an outcome).
fn id_and_word(head: &[u8], id: &str, key: &[u8], word: &str) -> Bytes {
    encode_with(|out| {
        out.extend_from_slice(head);
        write_str(out, id);
        out.extend_from_slice(key);
        out.extend_from_slice(word.as_bytes());
        out.extend_from_slice(br#""}"#);
    })
}

/// The producer's `ask-user-response`.
pub fn response(r: &ProducerResponse) -> Bytes {
    encode_with(|out| {
        out.extend_from_slice(br#"{"type":"ask-user-response","correlationId":"#);
        write_str(out, &r.correlation_id);
        out.extend_from_slice(br#","answers":{"#);
        for (n, (index, answer)) in r.answers.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.push(b'"');
            write_u64(out, *index as u64);
            out.extend_from_slice(b"\":");
            write_str(out, answer);
        }
        out.extend_from_slice(br#"},"cancelled":"#);
        write_bool(out, r.cancelled);
        out.extend_from_slice(br#","reason":""#);
        out.extend_from_slice(r.reason.as_str().as_bytes());
        out.extend_from_slice(br#"","result":{"llmContent":"#);
        write_str(out, &r.result.llm_content);
        out.extend_from_slice(br#","returnDisplay":"#);
        write_str(out, &r.result.return_display);
        out.extend_from_slice(br#","data":{"ask_user":"#);
        write_ask_user(out, &r.result.data.ask_user);
        out.extend_from_slice(b"}}}");
    })
}

fn write_ask_user(out: &mut Vec<u8>, d: &AskUserData) {
    out.extend_from_slice(br#"{"question_types":["#);
    for (n, t) in d.question_types.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(out, t);
    }
    out.extend_from_slice(br#"],"dismissed":"#);
    write_bool(out, d.dismissed);
    if let Some(empty) = d.empty_submission {
        out.extend_from_slice(br#","empty_submission":"#);
        write_bool(out, empty);
    }
    if let Some(count) = d.answer_count {
        out.extend_from_slice(br#","answer_count":"#);
        write_u64(out, count);
    }
    if let Some(reason) = &d.reason {
        out.extend_from_slice(br#","reason":"#);
        write_str(out, reason);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encode;
    use crate::protocol::frames::{ResultData, ResultPayload, ServerFrame};
    use std::borrow::Cow;
    use std::collections::BTreeMap;

    fn serde_str(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    fn ours(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_str(&mut out, s);
        out
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut cases: Vec<String> = [
            "",
            "plain",
            "exactly8",
            "sixteen bytes!!!",
            "quote\" and back\\slash",
            "\"\"\"\"\"\"\"\"\"",
            "é ü 中文 🎉 \u{7f} \u{80} \u{2028}",
            "tab\tnew\nline\rform\u{c}back\u{8}",
            "{\"answers\":{\"0\":\"SQLite\"}}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every byte value below 0x80 at every position of an eight-byte window.
        for c in 0u8..0x80 {
            for at in 0..9 {
                let mut s = "abcdefghijklmnop".to_string();
                s.insert(at, c as char);
                cases.push(s);
            }
        }
        for s in &cases {
            assert_eq!(ours(s), serde_str(s), "{s:?}");
        }
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        for n in [
            0i64,
            1,
            -1,
            9,
            10,
            -10,
            12345,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_i64(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
        let mut out = Vec::new();
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, serde_json::to_vec(&u64::MAX).unwrap());
    }

    #[test]
    fn random_strings_agree_with_serde_json() {
        let alphabet: Vec<char> = "ab\"\\\n\t\u{1}\u{1f} é中🎉\u{7f}".chars().collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let s: String = (0..len)
                .map(|i| alphabet[((seed >> (i % 50)) as usize + i * 7) % alphabet.len()])
                .collect();
            assert_eq!(ours(&s), serde_str(&s), "{s:?}");
        }
    }

    fn response_of(
        answers: &[(usize, &str)],
        cancelled: bool,
        data: AskUserData,
    ) -> ProducerResponse {
        ProducerResponse {
            correlation_id: "c-\"1\"\n".into(),
            answers: answers
                .iter()
                .map(|(i, a)| (*i, a.to_string()))
                .collect::<BTreeMap<_, _>>(),
            cancelled,
            reason: if cancelled {
                Outcome::Timeout
            } else {
                Outcome::Answered
            },
            result: ResultPayload {
                llm_content: "{\"answers\":{\"0\":\"x\"}}".into(),
                return_display: "**User answered:**\n  DB → x".into(),
                data: ResultData { ask_user: data },
            },
        }
    }

    #[test]
    fn frames_are_the_bytes_serde_writes() {
        let answered = AskUserData {
            question_types: vec![Cow::Borrowed("choice"), Cow::Owned("text".into())],
            dismissed: false,
            empty_submission: Some(false),
            answer_count: Some(2),
            reason: None,
        };
        let daemon = AskUserData {
            question_types: vec![],
            dismissed: true,
            empty_submission: None,
            answer_count: None,
            reason: Some(Cow::Borrowed("timeout")),
        };
        for r in [
            response_of(
                &[(0, "SQLite"), (3, "a\tb"), (12, "")],
                false,
                answered.clone(),
            ),
            response_of(&[], false, answered),
            response_of(&[], true, daemon),
        ] {
            assert_eq!(
                response(&r),
                encode(&ServerFrame::AskUserResponse(r.clone())),
                "{r:?}"
            );
        }
        for outcome in [Outcome::Answered, Outcome::Dismissed, Outcome::NoUi] {
            let frame = ServerFrame::AskUserAck {
                correlation_id: "é\"".into(),
                outcome,
            };
            assert_eq!(ack("é\"", outcome), encode(&frame));
        }
        for reason in [
            WithdrawReason::Answered,
            WithdrawReason::ProducerGone,
            WithdrawReason::Shutdown,
        ] {
            let frame = ServerFrame::AskUserWithdrawn {
                correlation_id: "x\\y".into(),
                reason,
            };
            assert_eq!(withdrawn("x\\y", reason), encode(&frame));
        }
    }
}
