//! A JSON writer for the daemon's fast encoders (frames, normalized questions, telemetry
//! lines): strings written skipping eight bytes at a time over text that needs no escape, and
//! integers, each byte-identical to what serde_json writes (the reference; tested here).
//! serde's derived encoders walk strings a byte at a time, which was the largest single cost
//! of a round trip.

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
pub(crate) fn any_escape(w: u64) -> bool {
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

pub fn write_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
