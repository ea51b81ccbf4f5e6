//! JavaScript regular expressions, as `new RegExp(pattern)` (no flags) makes them.
//!
//! The reference matches every `argsPattern` with V8's engine over UTF-16 text: lookbehind and
//! backreferences work, `\d` `\w` `\b` are ASCII, `.` excludes line terminators, and Annex B
//! reads `{`, `]` and `\u{61}` as literals. The `regex` crate has none of that; `regress` is an
//! ECMAScript engine, matched here over UTF-16 code units as V8 does without the `u` flag.

/// A compiled JavaScript `RegExp`.
#[derive(Debug, Clone)]
pub struct JsRegex {
    source: String,
    re: regress::Regex,
    /// A literal every match contains (the longest plain run of the pattern's top-level
    /// sequence, when it has no alternation): a text without it cannot match, and the engine
    /// is not run.
    required: Vec<u16>,
}

/// The pattern is not a valid JavaScript regular expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid regular expression: /{pattern}/: {message}")]
pub struct RegexError {
    /// The pattern.
    pub pattern: String,
    /// Why (regress's words; V8's differ, and the contract does not compare them).
    pub message: String,
}

impl JsRegex {
    /// `new RegExp(pattern)`.
    pub fn new(pattern: &str) -> Result<JsRegex, RegexError> {
        Self::with_flags(pattern, "")
    }

    /// `new RegExp(pattern, flags)`.
    pub fn with_flags(pattern: &str, flags: &str) -> Result<JsRegex, RegexError> {
        // V8 reads a pattern as UTF-16; regress takes code points. A TOML string cannot hold a
        // lone surrogate, so the two agree.
        let rewritten = annex_b_u_escapes(pattern);
        match regress::Regex::from_unicode(rewritten.chars().map(u32::from), flags) {
            Ok(re) => Ok(JsRegex {
                source: pattern.to_string(),
                re,
                // Under `i` a literal matches in either case: none is required as written.
                required: if flags.contains('i') {
                    vec![]
                } else {
                    required_literal(pattern)
                },
            }),
            Err(e) => Err(RegexError {
                pattern: pattern.to_string(),
                message: e.text,
            }),
        }
    }

    /// The pattern's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The literal every match contains (empty: none known).
    pub fn required(&self) -> &[u16] {
        &self.required
    }

    /// `re.test(text)`, the caller having found [`JsRegex::required`] in `text` already.
    pub fn test_utf16_found(&self, text: &[u16]) -> bool {
        self.re.find_from_ucs2(text, 0).next().is_some()
    }

    /// `re.test(text)` over UTF-16 code units.
    pub fn test_utf16(&self, text: &[u16]) -> bool {
        if !self.required.is_empty()
            && !text
                .windows(self.required.len())
                .any(|w| w == self.required.as_slice())
        {
            return false;
        }
        self.re.find_from_ucs2(text, 0).next().is_some()
    }

    /// `re.test(text)`.
    pub fn test(&self, text: &str) -> bool {
        let units: Vec<u16> = text.encode_utf16().collect();
        self.test_utf16(&units)
    }

    /// The first match's (start, end) in UTF-16 units, searching from `start`.
    pub fn find_at(&self, text: &[u16], start: usize) -> Option<(usize, usize)> {
        self.re
            .find_from_ucs2(text, start)
            .next()
            .map(|m| (m.start(), m.end()))
    }
}

/// The longest literal run (at least 3 units) of the pattern's top-level sequence, if it has
/// no top-level `|`: every match then contains it. A run is plain characters and identity
/// escapes, none quantified; `^`, `$`, `\\b` and `\\B` match no text, so the characters either
/// side of one are adjacent in every match and the run goes on through it (a `commandRegex` of
/// `^git` becomes `"command":"^git`, whose run is `"command":"git`). A group, a class, `.` or a
/// quantified atom ends a run and is skipped; anything this does not read plainly (an escape
/// like `\\u0041`, an Annex B literal brace) ends the search with the runs found so far.
fn required_literal(pattern: &str) -> Vec<u16> {
    let chars: Vec<char> = pattern.chars().collect();
    // An alternation at the top level makes no literal required; one inside a group does not
    // matter (the group is skipped).
    let (mut depth, mut class, mut k) = (0i32, false, 0);
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 1,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class => depth += 1,
            ')' if !class => depth -= 1,
            '|' if !class && depth <= 0 => return vec![],
            _ => {}
        }
        k += 1;
    }
    let (mut best, mut run): (Vec<char>, Vec<char>) = (vec![], vec![]);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '^' || c == '$' {
            i += 1;
            continue;
        }
        if c == '\\' && matches!(chars.get(i + 1), Some('b' | 'B')) {
            i += 2;
            continue;
        }
        let literal = match c {
            '\\' => match chars.get(i + 1) {
                Some(&e) if !e.is_ascii_alphanumeric() => Some((e, i + 2)),
                _ => None,
            },
            '.' | '?' | '*' | '+' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => None,
            _ => Some((c, i + 1)),
        };
        match literal {
            Some((ch, next)) if !matches!(chars.get(next), Some('?' | '*' | '+' | '{')) => {
                run.push(ch);
                i = next;
            }
            _ => {
                if run.len() > best.len() {
                    best = std::mem::take(&mut run);
                }
                run.clear();
                match skip_atom(&chars, i) {
                    Some(next) => i = next,
                    None => break,
                }
            }
        }
    }
    if run.len() > best.len() {
        best = run;
    }
    if best.len() < 3 {
        return vec![];
    }
    best.iter().collect::<String>().encode_utf16().collect()
}

/// Past the atom at `i` and its quantifier: a group, a class, `.`, an identity escape or a
/// plain character. `None` for what is not read here (other escapes, a brace that is no
/// quantifier, a stray bracket): the literal search stops there.
fn skip_atom(chars: &[char], i: usize) -> Option<usize> {
    let mut j = match chars[i] {
        '(' => {
            let (mut depth, mut class, mut j) = (0i32, false, i);
            loop {
                match chars.get(j)? {
                    '\\' => j += 1,
                    '[' if !class => class = true,
                    ']' if class => class = false,
                    '(' if !class => depth += 1,
                    ')' if !class => {
                        depth -= 1;
                        if depth == 0 {
                            break j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        '[' => {
            let mut j = i + 1;
            loop {
                match chars.get(j)? {
                    '\\' => j += 1,
                    ']' => break j + 1,
                    _ => {}
                }
                j += 1;
            }
        }
        '\\' => match chars.get(i + 1) {
            Some(&e) if !e.is_ascii_alphanumeric() => i + 2,
            // \d \w \s and their negations: one unit of a class.
            Some('d' | 'D' | 'w' | 'W' | 's' | 'S') => i + 2,
            _ => return None,
        },
        '?' | '*' | '+' | '{' | '}' | ')' | ']' | '|' => return None,
        _ => i + 1,
    };
    match chars.get(j) {
        Some('?' | '*' | '+') => j += 1,
        Some('{') => {
            let close = j + chars[j..].iter().position(|&c| c == '}')?;
            let inner: String = chars[j + 1..close].iter().collect();
            let (lo, hi) = inner.split_once(',').unwrap_or((&inner, "0"));
            let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
            if lo.is_empty() || !digits(lo) || !digits(hi) {
                return None;
            }
            j = close + 1;
        }
        _ => return Some(j),
    }
    if chars.get(j) == Some(&'?') {
        j += 1;
    }
    Some(j)
}

/// Without the `u` flag, `\\u` not followed by four hex digits is Annex B's identity escape
/// (`\\u{61}` is `u` repeated 61 times); regress reads it as a code point escape, so the
/// backslash is dropped first.
fn annex_b_u_escapes(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' && i + 1 < chars.len() {
            if chars[i + 1] == 'u' {
                let hex4 =
                    chars.len() >= i + 6 && chars[i + 2..i + 6].iter().all(char::is_ascii_hexdigit);
                if !hex4 {
                    out.push('u');
                    i += 2;
                    continue;
                }
            }
            out.push(chars[i]);
            out.push(chars[i + 1]);
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// The reference's `escapeRegex`: `[-[\]{}()*+?.,\\^$|#\s"]` each get a backslash.
pub fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for ch in text.chars() {
        if "-[]{}()*+?.,\\^$|#\"".contains(ch) || is_js_space(ch) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// JavaScript's `\s` (and the set `String.prototype.trim` removes).
pub fn is_js_space(ch: char) -> bool {
    matches!(
        ch,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// `String.prototype.trim` over UTF-16 units.
pub fn js_trim_utf16(s: &[u16]) -> &[u16] {
    let sp = |u: u16| char::from_u32(u32::from(u)).is_some_and(is_js_space);
    let start = s.iter().position(|&u| !sp(u)).unwrap_or(s.len());
    let end = s.iter().rposition(|&u| !sp(u)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// The reference's `isSafeRegExp`: valid, at most 2,048 UTF-16 units, and no group holding a
/// quantifier that is itself quantified (by its own heuristic regex, so any `(?:…)?` too).
pub fn is_safe_regexp(pattern: &str) -> bool {
    if JsRegex::new(pattern).is_err() {
        return false;
    }
    if pattern.encode_utf16().count() > 2048 {
        return false;
    }
    thread_local! {
        static NESTED: JsRegex = JsRegex::new(r"\([^)]*[*+?{].*\)[*+?{]").expect("valid");
    }
    !NESTED.with(|re| re.test(pattern))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javascript_semantics() {
        assert!(JsRegex::new("(?i)abc").is_err());
        assert!(JsRegex::new("[z-a]").is_err());
        assert!(JsRegex::new("a{").unwrap().test("a{"));
        assert!(JsRegex::new("]").unwrap().test("]"));
        assert!(JsRegex::new(r"\u{2}").unwrap().test("uu"));
        assert!(JsRegex::new(r"(?<=a)b").unwrap().test("ab"));
        assert!(JsRegex::new(r"(a)\1").unwrap().test("aa"));
        assert!(!JsRegex::new(r"^\d$").unwrap().test("٣"));
        assert!(!JsRegex::new(r"^.$").unwrap().test("\u{2028}"));
        assert!(JsRegex::new(r"^..$").unwrap().test("😀"));
        assert!(!is_safe_regexp("(a+)+$"));
        assert!(!is_safe_regexp("(?:src/)?main"));
        assert!(is_safe_regexp("a+b"));
        assert!(!is_safe_regexp(&"a".repeat(2049)));
        assert_eq!(
            String::from_utf16_lossy(&required_literal(r#"\"command\":\"git\ st(?:[\s"]|\\")"#)),
            "\"command\":\"git st"
        );
        assert!(required_literal("ab|cd").is_empty());
        assert_eq!(String::from_utf16_lossy(&required_literal("abcd?e")), "abc");
    }

    /// Every literal `required_literal` names is in every text the regex matches: checked on
    /// patterns of each construct against texts that match them.
    #[test]
    fn the_required_literal_is_in_every_match() {
        let lit = |p: &str| String::from_utf16_lossy(&required_literal(p));
        for (pattern, want, matching) in [
            (
                r#""command":"^make t-1( |$)"#,
                r#""command":"make t-1"#,
                None,
            ),
            (r"^abc\bdef$", "abcdef", None),
            (
                r"x(?:ab)*longest\.run[0-9]+tail",
                "longest.run",
                Some("xlongest.run7tail"),
            ),
            (r"ab\d{2,3}cdefg", "cdefg", Some("ab12cdefg")),
            (r"(?<=pre)fix-ed", "fix-ed", Some("prefix-ed")),
            (r"abcd\u0041efghij", "abcd", Some("abcdAefghij")),
            (r"abcd\1efghij", "abcd", None),
            (r"abc{efghij", "ab", None),
            (r"[a-z]+\.rs", ".rs", Some("main.rs")),
            (r"(a|b)cde", "cde", Some("acde")),
            (r"abc*defgh", "defgh", Some("abdefgh")),
            (r"abc+?defgh", "defgh", Some("abcdefgh")),
        ] {
            assert_eq!(
                lit(pattern),
                if want.len() < 3 { "" } else { want },
                "{pattern}"
            );
            if let Some(text) = matching {
                assert!(
                    JsRegex::new(pattern).unwrap().test(text),
                    "{pattern} on {text}"
                );
                assert!(text.contains(&lit(pattern)), "{pattern}");
            }
        }
        // A literal matches in either case under `i`: none is required.
        assert!(JsRegex::with_flags("abcdef", "i")
            .unwrap()
            .required()
            .is_empty());
        assert!(JsRegex::with_flags("abcdef", "i").unwrap().test("ABCDEF"));
        assert!(JsRegex::new(r"\x00abc").unwrap().test("\u{0}abc"));
    }
}
