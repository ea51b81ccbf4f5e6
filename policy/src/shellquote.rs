//! `shell-quote` 1.8.3's `parse`, which the reference's safety heuristics read commands with.
//!
//! It is not a shell: quotes are joined, `$VAR` expands from an environment object (the
//! reference passes none, so variables expand to nothing; `bash -c "…"` unwrapping passes
//! `key => '$' + key`), a `#` anywhere outside quotes starts a comment, an unterminated quote is
//! dropped. Its tokenizer is the library's own regular expression, run here with the same
//! ECMAScript engine over UTF-16, so the heuristics see exactly the words the reference sees.

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A word.
    Word(String),
    /// A control operator (`&&`, `|`, `;`, `(`, …).
    Op(String),
    /// A word with an unquoted `*` or `?`.
    Glob(String),
    /// A comment (the rest of the input after `#`).
    Comment(String),
}

impl Entry {
    /// The reference's `extractStringFromParseEntry`.
    pub fn text(&self) -> &str {
        match self {
            Entry::Word(s) | Entry::Op(s) | Entry::Glob(s) => s,
            Entry::Comment(_) => "",
        }
    }
}

/// The environment variables expand from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Env {
    /// `{}`: a plain object, so names on `Object.prototype` expand to their functions' text.
    EmptyObject,
    /// `(key) => '$' + key`: variables stay as written (without braces).
    KeepDollar,
}

/// `parse` threw ("Bad substitution").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Bad substitution: {0}")]
pub struct BadSubstitution(pub String);

/// The library's control operators as a regex alternation (what [`is_control`] and
/// [`control_at`] implement; the tests hold them to it).
#[cfg(test)]
const CONTROL: &str = r"(?:\|\||\&\&|;;|\|\&|\<\(|\<\<\<|>>|>\&|<\&|[&;()|<>])";

/// `/^CONTROL$/.test(s)`: without the `m` flag `^` and `$` anchor the whole string, so it is
/// exactly "s is one of CONTROL's alternatives" (the test below checks it against the regex).
fn is_control(s: &[u16]) -> bool {
    match s {
        [a] => b"&;()|<>".iter().any(|&c| u16::from(c) == *a),
        [a, b] => [b"||", b"&&", b";;", b"|&", b"<(", b">>", b">&", b"<&"]
            .iter()
            .any(|op| u16::from(op[0]) == *a && u16::from(op[1]) == *b),
        [a, b, c] => [*a, *b, *c] == [u16::from(b'<'); 3],
        _ => false,
    }
}

/// The library's tokenizer, `/(CONTROL)|(BAREWORD|"…"|'…')+/g`, as source text. The scan below
/// ([`find_chunk`]) finds what `exec` finds with it; the tests hold the two together.
#[cfg(test)]
fn chunker_source() -> String {
    let meta = r"|&;()<> \t";
    let bareword = format!(r#"(\\['"{meta}]|[^\s'"{meta}])+"#);
    let single = r#""((\\"|[^"])*?)""#;
    let double = r#"'((\\'|[^'])*?)'"#;
    format!("({CONTROL})|({bareword}|{single}|{double})+")
}

/// ECMAScript's `\s` over UTF-16 code units (WhiteSpace and LineTerminator).
fn is_js_space(u: u16) -> bool {
    matches!(
        u,
        0x09..=0x0d | 0x20 | 0xa0 | 0x1680 | 0x2000..=0x200a | 0x2028 | 0x2029 | 0x202f | 0x205f
            | 0x3000 | 0xfeff
    )
}

/// A quote or one of the chunker's meta characters (`'"|&;()<> \t`).
fn is_quote_or_meta(u: u16) -> bool {
    u < 128 && b"'\"|&;()<> \t".contains(&(u as u8))
}

/// The control operator at `p`, in the regex's order of alternatives: its length.
fn control_at(s: &[u16], p: usize) -> Option<usize> {
    let at = |i: usize| s.get(p + i).map_or(0, |&u| u);
    let is = |i: usize, c: u8| at(i) == u16::from(c);
    for op in [
        &b"||"[..],
        b"&&",
        b";;",
        b"|&",
        b"<(",
        b"<<<",
        b">>",
        b">&",
        b"<&",
    ] {
        if op.iter().enumerate().all(|(i, &c)| is(i, c)) {
            return Some(op.len());
        }
    }
    is_control(&[at(0)]).then_some(1)
}

/// A quoted string opening at `p` with `q`: `q((\\q|[^q])*?)q`, lazy and backtracking as
/// the regex is. Scanning forward, an escaped quote is taken whole; without a closing quote
/// after it, backtracking takes the last escaped quote's quote as the closing one.
fn quoted_at(s: &[u16], p: usize, q: u16) -> Option<usize> {
    if s.get(p) != Some(&q) {
        return None;
    }
    let mut i = p + 1;
    let mut last_escaped = None;
    while i < s.len() {
        if s[i] == q {
            return Some(i + 1);
        }
        if s[i] == BS && s.get(i + 1) == Some(&q) {
            last_escaped = Some(i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    last_escaped.map(|close| close + 1)
}

/// A bare word at `p`, `(\\['"META]|[^\s'"META])+`: where it ends.
fn bareword_at(s: &[u16], p: usize) -> Option<usize> {
    let mut i = p;
    while i < s.len() {
        if s[i] == BS && s.get(i + 1).is_some_and(|&u| is_quote_or_meta(u)) {
            i += 2;
        } else if !is_js_space(s[i]) && !is_quote_or_meta(s[i]) {
            i += 1;
        } else {
            break;
        }
    }
    (i > p).then_some(i)
}

/// The chunk `exec` finds from `from` (the regex with the `g` flag at `lastIndex`): the
/// leftmost position where a control operator or one or more words and quoted strings match.
fn find_chunk(s: &[u16], from: usize) -> Option<(usize, usize)> {
    for p in from..s.len() {
        if let Some(n) = control_at(s, p) {
            return Some((p, p + n));
        }
        let mut end = p;
        loop {
            let next = bareword_at(s, end)
                .or_else(|| quoted_at(s, end, DQ))
                .or_else(|| quoted_at(s, end, SQ));
            match next {
                Some(e) => end = e,
                None => break,
            }
        }
        if end > p {
            return Some((p, end));
        }
    }
    None
}

/// `shell-quote`'s `parse(command, env)`.
pub fn parse(command: &str, env: Env) -> Result<Vec<Entry>, BadSubstitution> {
    let string: Vec<u16> = command.encode_utf16().collect();
    parse_with(&string, env)
}

fn parse_with(string: &[u16], env: Env) -> Result<Vec<Entry>, BadSubstitution> {
    let mut matches: Vec<(usize, usize)> = vec![];
    let mut last = 0;
    while last <= string.len() {
        match find_chunk(string, last) {
            Some((s, e)) => {
                matches.push((s, e));
                last = if e == s { e + 1 } else { e };
            }
            None => break,
        }
    }
    let mut out = vec![];
    let mut commented = false;
    for (mstart, mend) in matches {
        let s = &string[mstart..mend];
        if s.is_empty() || commented {
            continue;
        }
        if is_control(s) {
            out.push(Entry::Op(String::from_utf16_lossy(s)));
            continue;
        }
        let (entries, comment) = token(string, mstart, s, env)?;
        out.extend(entries);
        if comment {
            commented = true;
        }
    }
    Ok(out)
}

const BS: u16 = b'\\' as u16;
const DQ: u16 = b'"' as u16;
const SQ: u16 = b'\'' as u16;
const DS: u16 = b'$' as u16;

fn is_word_unit(u: u16) -> bool {
    u < 128 && ((u as u8).is_ascii_alphanumeric() || u == u16::from(b'_'))
}

fn get_var(env: Env, key: &[u16]) -> Vec<u16> {
    let key_s = String::from_utf16_lossy(key);
    match env {
        Env::KeepDollar => {
            let mut v: Vec<u16> = vec![DS];
            v.extend_from_slice(key);
            v
        }
        Env::EmptyObject => {
            if key.is_empty() {
                return vec![DS];
            }
            let text = match key_s.as_str() {
                "constructor" => "function Object() { [native code] }".to_string(),
                // An object value: the library splices it in between its random tokens.
                "__proto__" => "\u{0}askbus-token\u{0}{}\u{0}askbus-token\u{0}".to_string(),
                "hasOwnProperty"
                | "isPrototypeOf"
                | "propertyIsEnumerable"
                | "toLocaleString"
                | "toString"
                | "valueOf"
                | "__defineGetter__"
                | "__defineSetter__"
                | "__lookupGetter__"
                | "__lookupSetter__" => {
                    format!("function {key_s}() {{ [native code] }}")
                }
                _ => String::new(),
            };
            text.encode_utf16().collect()
        }
    }
}

/// One chunk that is not a control operator: returns its entries and whether a comment began.
fn token(
    string: &[u16],
    mstart: usize,
    s: &[u16],
    env: Env,
) -> Result<(Vec<Entry>, bool), BadSubstitution> {
    let char_at = |i: usize| -> Option<u16> { s.get(i).copied() };
    let mut quote: Option<u16> = None;
    let mut esc = false;
    let mut out: Vec<u16> = vec![];
    let mut is_glob = false;
    let mut i = 0usize;
    // parseEnvVar: `i` is at the `$`; leaves `i` on the variable's last unit.
    let parse_env_var = |i: &mut usize| -> Result<Vec<u16>, BadSubstitution> {
        *i += 1;
        let c = char_at(*i);
        let varname: Vec<u16>;
        if c == Some(u16::from(b'{')) {
            *i += 1;
            if char_at(*i) == Some(u16::from(b'}')) {
                let from = i.saturating_sub(2);
                let to = (*i + 1).min(s.len());
                return Err(BadSubstitution(String::from_utf16_lossy(&s[from..to])));
            }
            let rest = if *i <= s.len() { &s[*i..] } else { &[][..] };
            match rest.iter().position(|&u| u == u16::from(b'}')) {
                None => return Err(BadSubstitution(String::from_utf16_lossy(rest))),
                Some(off) => {
                    varname = rest[..off].to_vec();
                    *i += off;
                }
            }
        } else if c.is_some_and(|u| "*@#?$!_-".encode_utf16().any(|x| x == u)) {
            varname = vec![c.expect("some")];
            *i += 1;
        } else {
            let rest = if *i <= s.len() { &s[*i..] } else { &[][..] };
            match rest.iter().position(|&u| !is_word_unit(u)) {
                None => {
                    varname = rest.to_vec();
                    *i = s.len();
                }
                Some(off) => {
                    varname = rest[..off].to_vec();
                    // `i += varend.index - 1`: the loop's `i++` then lands on the terminator.
                    *i = (*i + off).wrapping_sub(1);
                }
            }
        }
        Ok(get_var(env, &varname))
    };
    while i < s.len() {
        let c = s[i];
        is_glob = is_glob || (quote.is_none() && (c == u16::from(b'*') || c == u16::from(b'?')));
        if esc {
            out.push(c);
            esc = false;
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            } else if q == SQ {
                out.push(c);
            } else if c == BS {
                i += 1;
                match char_at(i) {
                    Some(n) if n == DQ || n == BS || n == DS => out.push(n),
                    Some(n) => {
                        out.push(BS);
                        out.push(n);
                    }
                    None => out.push(BS),
                }
            } else if c == DS {
                out.extend(parse_env_var(&mut i)?);
            } else {
                out.push(c);
            }
        } else if c == DQ || c == SQ {
            quote = Some(c);
        } else if is_control(&[c]) {
            return Ok((vec![Entry::Op(String::from_utf16_lossy(s))], false));
        } else if c == u16::from(b'#') {
            let comment = Entry::Comment(String::from_utf16_lossy(&string[mstart + i + 1..]));
            if !out.is_empty() {
                return Ok((
                    vec![Entry::Word(String::from_utf16_lossy(&out)), comment],
                    true,
                ));
            }
            return Ok((vec![comment], true));
        } else if c == BS {
            esc = true;
        } else if c == DS {
            out.extend(parse_env_var(&mut i)?);
        } else {
            out.push(c);
        }
        i = i.wrapping_add(1);
    }
    let text = String::from_utf16_lossy(&out);
    if is_glob {
        return Ok((vec![Entry::Glob(text)], false));
    }
    Ok((vec![Entry::Word(text)], false))
}

/// The words the reference's heuristics see: `parse(command).map(extractStringFromParseEntry)`.
pub fn words(command: &str) -> Result<Vec<String>, BadSubstitution> {
    Ok(parse(command, Env::EmptyObject)?
        .iter()
        .map(|e| e.text().to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex::JsRegex;

    fn w(s: &str) -> Vec<String> {
        words(s).unwrap()
    }

    /// The scan against the library's regex (run by the same ECMAScript engine) on every
    /// string of up to 4 units over the characters that matter, and on random longer ones.
    #[test]
    fn find_chunk_is_the_chunker_regex() {
        let re = JsRegex::new(&chunker_source()).expect("the chunker");
        type Finder<'a> = &'a dyn Fn(&[u16], usize) -> Option<(usize, usize)>;
        let chunks = |s: &[u16], f: Finder| {
            let (mut out, mut last) = (vec![], 0);
            while last <= s.len() {
                match f(s, last) {
                    Some((a, b)) => {
                        out.push((a, b));
                        last = if a == b { b + 1 } else { b };
                    }
                    None => break,
                }
            }
            out
        };
        let by_regex = |s: &[u16], from: usize| re.find_at(s, from);
        let units: Vec<u16> = "\\\"'|&;<> \t\na\u{a0}\u{2028}".encode_utf16().collect();
        let mut level: Vec<Vec<u16>> = vec![vec![]];
        let mut checked = 0;
        for _ in 0..4 {
            let mut next = vec![];
            for p in &level {
                for &u in &units {
                    let mut q = p.clone();
                    q.push(u);
                    assert_eq!(chunks(&q, &find_chunk), chunks(&q, &by_regex), "{q:?}");
                    checked += 1;
                    next.push(q);
                }
            }
            level = next;
        }
        let wide: Vec<u16> = "\\\"'|&;()<> \t\r\nab$#=*\u{a0}\u{2028}\u{3000}\u{feff}é"
            .encode_utf16()
            .chain([0xd800, 0xdc00])
            .collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let s: Vec<u16> = (0..len)
                .map(|_| wide[(next() % wide.len() as u64) as usize])
                .collect();
            assert_eq!(chunks(&s, &find_chunk), chunks(&s, &by_regex), "{s:?}");
            checked += 1;
        }
        assert!(checked > 30_000);
    }

    #[test]
    fn is_control_is_the_anchored_control_regex() {
        let re = JsRegex::new(&format!("^{CONTROL}$")).expect("valid");
        let units: Vec<u16> = "&;()|<>\"' a$#\n\\x\u{2028}".encode_utf16().collect();
        let mut all: Vec<Vec<u16>> = vec![vec![]];
        for len in 1..=4 {
            let mut next = vec![];
            for p in all.iter().filter(|p| p.len() == len - 1) {
                for &u in &units {
                    let mut q = p.clone();
                    q.push(u);
                    next.push(q);
                }
            }
            all.extend(next);
        }
        assert!(all.len() > 20_000);
        for s in &all {
            assert_eq!(
                is_control(s),
                re.test_utf16(s),
                "{:?}",
                String::from_utf16_lossy(s)
            );
        }
    }

    #[test]
    fn like_shell_quote() {
        assert_eq!(
            w("ls -la && rm -rf /"),
            ["ls", "-la", "&&", "rm", "-rf", "/"]
        );
        assert_eq!(w(r#"echo "a b"'c'"#), ["echo", "a bc"]);
        assert_eq!(w("echo $HOME x"), ["echo", "", "x"]);
        assert_eq!(w("cat a#b c"), ["cat", "a", ""]);
        assert_eq!(w("ls *.rs"), ["ls", "*.rs"]);
        assert_eq!(w("echo \"unterminated"), ["echo", "unterminated"]);
        assert!(words("echo ${}").is_err());
        assert_eq!(w("a|b"), ["a", "|", "b"]);
        assert_eq!(
            parse("\"ls $X ${Y}\"", Env::KeepDollar).unwrap(),
            [Entry::Word("ls $X $Y".into())]
        );
    }
}
