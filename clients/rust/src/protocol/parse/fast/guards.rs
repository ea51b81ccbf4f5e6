//! The guards in front of the fast parser: what serde would let through unchecked where the
//! reference's `Value` refuses it (a lone surrogate escape, invalid UTF-8 in a skipped field,
//! a number past an f64, nesting past serde_json's depth limit; each found by fuzzing). A
//! frame that may hold one is left to the reference. Each is a cheap over-approximation: it
//! may send a harmless frame to the reference, never the reverse.

/// Whether `payload` holds an escape `\uD800`–`\uDFFF` (either case). A `\\u…` (an escaped
/// backslash before `u`) also counts, which only sends that rare frame to the reference.
/// Most frames hold no backslash at all, so it looks only where `memchr` finds one (a
/// four-byte window at every byte cost more than the rest of the parse).
pub(super) fn has_surrogate_escape(payload: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', payload).any(|i| match payload.get(i + 1..i + 4) {
        Some(&[b'u', hi, lo]) => {
            matches!(hi, b'd' | b'D') && matches!(lo, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
        }
        _ => false,
    })
}

/// Whether raw JSON text `payload` may hold a number serde_json reads as out of range: one with an exponent
/// (a digit or `.`, then `e` or `E`, then a digit or sign, outside a `\u` escape; inside a
/// string too, which only sends that frame to the reference), or a run of digits long enough
/// to pass 1.8e308.
pub(super) fn may_hold_huge_number(payload: &[u8]) -> bool {
    let exponent = memchr::memchr2_iter(b'e', b'E', payload).any(|i| {
        i > 0
            && matches!(payload[i - 1], b'0'..=b'9' | b'.')
            && matches!(payload.get(i + 1), Some(b'0'..=b'9' | b'+' | b'-'))
            // A hex digit of a `\uXXXX` escape (Python's json writes é as `\u00e9`).
            && !(2..=5).any(|k| i >= k && payload[i - k] == b'\\' && payload[i - k + 1] == b'u')
    });
    exponent || has_digit_run(payload, MIN_HUGE_DIGITS)
}

/// The fewest digits of an integer part past an f64's range (1.8e308 has 309).
const MIN_HUGE_DIGITS: usize = 309;

/// Whether `payload` may hold `min` digits in a row: counted in aligned eight-byte words of
/// digits, so a run a few digits shorter may count too.
pub(super) fn has_digit_run(payload: &[u8], min: usize) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A run of `min` digits covers this many whole aligned words.
    let words = (min - 7) / 8;
    let mut run = 0;
    for chunk in payload.chunks_exact(8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes")) ^ (ONES * 0x30);
        // Every byte was b'0'..=b'9': now 0..=9, so no high nibble and nothing past 9.
        let digits = w & (ONES * 0xf0) == 0 && w.wrapping_add(ONES * 0x76) & (ONES * 0x80) == 0;
        run = if digits { run + 1 } else { 0 };
        if run >= words {
            return true;
        }
    }
    false
}

/// serde_json's depth limit: a `Value` nested deeper is refused.
const MAX_DEPTH: usize = 128;

/// Whether `payload` may nest arrays and objects past [`MAX_DEPTH`]: never with fewer opening
/// brackets than that (the usual frame); otherwise its nesting is measured, strings skipped.
pub(super) fn may_nest_too_deep(payload: &[u8]) -> bool {
    if memchr::memchr2_iter(b'[', b'{', payload)
        .nth(MAX_DEPTH - 2)
        .is_none()
    {
        return false;
    }
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in payload {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max >= MAX_DEPTH - 1
}
