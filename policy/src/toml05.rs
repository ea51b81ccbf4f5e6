//! TOML 0.5 exactly as `@iarna/toml` 2.2.5 reads it (the parser Gemini CLI's policy loader uses).
//!
//! The `toml` crate reads TOML 1.1, which accepts what the reference rejects (mixed-type arrays,
//! newlines in inline tables) and rejects what it accepts (a dotted key reopened as a `[table]`),
//! so this is a port of the reference's character-level state machine as a recursive descent:
//! the same characters end a word, the same quirks are kept (a trailing comma in an inline table
//! is accepted, a byte-order mark is an unknown character, integers outside ±(2^53−1) are
//! BigInts, `inf`/`nan` are plain numbers that do not mix with floats in an array). Only whether
//! a file parses, and the values it yields, matter to the loader; the error texts are kept close
//! to the reference's for the `details` people read.

use std::fmt;

/// A parsed TOML value, typed as the reference's loader sees it after parsing.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(String),
    /// A safe integer (|n| ≤ 2^53−1), a JavaScript number.
    Integer(f64),
    /// An integer outside the safe range: a JavaScript BigInt (wrapped to 64 bits, as the reference).
    BigInt(i64),
    /// A float written as a float (`1.0`, `1e2`): a JavaScript number.
    Float(f64),
    /// `inf`, `nan` and their signed forms: a JavaScript number of another TOML "type".
    SpecialFloat(f64),
    /// A boolean.
    Boolean(bool),
    /// A date, time or datetime (a JavaScript `Date`; its text is kept).
    Datetime(String),
    /// An array, inline or of tables.
    Array(Vec<Value>),
    /// A table, inline or not; keys in insertion order.
    Table(Vec<(String, Value)>),
}

impl Value {
    /// The value of `key` in a table.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Table(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A parse error, with the reference's message and position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, as the reference words it.
    pub message: String,
    /// 0-based line.
    pub line: usize,
    /// 0-based column.
    pub col: usize,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at row {}, col {}",
            self.message,
            self.line + 1,
            self.col + 1
        )
    }
}

impl std::error::Error for Error {}

const END: u32 = 0x110000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Table { declared: bool },
    InlineTable,
    List,
    InlineList,
    Leaf,
}

/// The parser's working tree: values tagged with how they were made (the reference's symbols).
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    value: Option<Value>,
    entries: Vec<(String, Node)>,
    items: Vec<Node>,
}

impl Node {
    fn table() -> Node {
        Node {
            kind: Kind::Table { declared: false },
            value: None,
            entries: vec![],
            items: vec![],
        }
    }
    fn leaf(v: Value) -> Node {
        Node {
            kind: Kind::Leaf,
            value: Some(v),
            entries: vec![],
            items: vec![],
        }
    }
    fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
    fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }
    fn is_table(&self) -> bool {
        matches!(self.kind, Kind::Table { .. })
    }
    fn declared(&self) -> bool {
        matches!(self.kind, Kind::Table { declared: true })
    }
    fn into_value(self) -> Value {
        match self.kind {
            Kind::Leaf => self.value.expect("leaf"),
            Kind::Table { .. } | Kind::InlineTable => Value::Table(
                self.entries
                    .into_iter()
                    .map(|(k, v)| (k, v.into_value()))
                    .collect(),
            ),
            Kind::List | Kind::InlineList => {
                Value::Array(self.items.into_iter().map(Node::into_value).collect())
            }
        }
    }
    /// The reference's `tomlType`, for the single-type check of inline arrays.
    fn toml_type(&self) -> &'static str {
        match self.kind {
            Kind::InlineTable => "inline-table",
            Kind::InlineList => "inline-list",
            Kind::Table { .. } => "table",
            Kind::List => "list",
            Kind::Leaf => match self.value.as_ref().expect("leaf") {
                Value::String(_) => "string",
                Value::Integer(_) | Value::BigInt(_) => "integer",
                Value::Float(_) => "float",
                Value::SpecialFloat(_) => "number",
                Value::Boolean(_) => "boolean",
                Value::Datetime(_) => "datetime",
                Value::Array(_) | Value::Table(_) => "object",
            },
        }
    }
}

struct Parser {
    chars: Vec<char>,
    i: usize,
    line: usize,
    col: usize,
}

type R<T> = Result<T, Error>;

fn is_digit(c: u32) -> bool {
    (0x30..=0x39).contains(&c)
}
fn is_hexit(c: u32) -> bool {
    is_digit(c) || (0x41..=0x46).contains(&c) || (0x61..=0x66).contains(&c)
}
fn is_key_char(c: u32) -> bool {
    is_digit(c)
        || (0x41..=0x5A).contains(&c)
        || (0x61..=0x7A).contains(&c)
        || c == '_' as u32
        || c == '-' as u32
}

/// Parses a TOML document as `@iarna/toml` 2.2.5 does; the top level is a table.
pub fn parse(text: &str) -> Result<Value, Error> {
    let mut p = Parser {
        chars: text.chars().collect(),
        i: 0,
        line: 0,
        col: 0,
    };
    let mut root = Node::table();
    p.document(&mut root)?;
    Ok(root.into_value())
}

impl Parser {
    fn c(&self) -> u32 {
        self.chars.get(self.i).map_or(END, |&c| c as u32)
    }
    fn is(&self, ch: char) -> bool {
        self.c() == ch as u32
    }
    fn adv(&mut self) {
        if self.i < self.chars.len() {
            if self.chars[self.i] == '\n' {
                self.line += 1;
                self.col = 0;
            } else {
                self.col += 1;
            }
            self.i += 1;
        }
    }
    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(Error {
            message: msg.into(),
            line: self.line,
            col: self.col,
        })
    }
    fn at_end_of_line(&self) -> bool {
        let c = self.c();
        c == END || c == 0x0A || c == 0x0D
    }
    fn at_end_of_word(&self) -> bool {
        let c = self.c();
        c == '#' as u32 || c == 0x09 || c == 0x20 || self.at_end_of_line()
    }

    fn document(&mut self, root: &mut Node) -> R<()> {
        // The current table, as a path of keys (and list indexes) from the root.
        let mut ctx: Vec<PathStep> = vec![];
        loop {
            let c = self.c();
            if c == END {
                return Ok(());
            } else if c == '[' as u32 {
                self.adv();
                ctx = self.table_or_list(root)?;
            } else if c == '#' as u32 {
                self.comment();
            } else if c == 0x0A || c == 0x20 || c == 0x09 || c == 0x0D {
                self.adv();
            } else if is_key_char(c) || c == '\'' as u32 || c == '"' as u32 {
                let (keys, value) = self.assign()?;
                let target = resolve(root, &ctx);
                self.record_assign(target, keys, value)?;
                self.whitespace_to_eol()?;
            } else {
                return self.err(format!("Unknown character \"{c}\""));
            }
        }
    }

    fn comment(&mut self) {
        while !(self.c() == END || self.c() == 0x0A) {
            self.adv();
        }
    }

    fn whitespace_to_eol(&mut self) -> R<()> {
        loop {
            let c = self.c();
            if c == 0x20 || c == 0x09 || c == 0x0D {
                self.adv();
            } else if c == '#' as u32 {
                self.comment();
                return Ok(());
            } else if c == END || c == 0x0A {
                return Ok(());
            } else {
                return self.err(
                    "Unexpected character, expected only whitespace or comments till end of line",
                );
            }
        }
    }

    fn record_assign(&self, target: &mut Node, mut keys: Vec<String>, value: Node) -> R<()> {
        let last = keys.pop().expect("a key");
        let mut target = target;
        for kw in keys {
            if let Some(existing) = target.get_mut(&kw) {
                if !existing.is_table() || existing.declared() {
                    return self.err("Can't redefine existing key");
                }
            } else {
                target.entries.push((kw.clone(), Node::table()));
            }
            target = target.get_mut(&kw).expect("just ensured");
        }
        if target.has(&last) {
            return self.err("Can't redefine existing key");
        }
        target.entries.push((last, value));
        Ok(())
    }

    /// `key = value` (dotted keys allowed), leaving the character after the value current.
    fn assign(&mut self) -> R<(Vec<String>, Node)> {
        let mut keys = vec![self.keyword()?];
        loop {
            let c = self.c();
            if c == '.' as u32 {
                self.adv();
                while self.is(' ') || self.is('\t') {
                    self.adv();
                }
                keys.push(self.keyword()?);
            } else if c == 0x20 || c == 0x09 {
                self.adv();
            } else if c == '=' as u32 {
                self.adv();
                break;
            } else {
                return self.err("Invalid character, expected \"=\"");
            }
        }
        while self.is(' ') || self.is('\t') {
            self.adv();
        }
        let v = self.value()?;
        Ok((keys, v))
    }

    fn keyword(&mut self) -> R<String> {
        if self.is('"') {
            self.adv();
            self.basic_string()
        } else if self.is('\'') {
            self.adv();
            self.literal_string()
        } else {
            let mut buf = String::new();
            loop {
                let c = self.c();
                if c == END {
                    return self.err("Key ended without value");
                } else if is_key_char(c) {
                    buf.push(self.chars[self.i]);
                    self.adv();
                } else if buf.is_empty() {
                    return self.err("Empty bare keys are not allowed");
                } else {
                    return Ok(buf);
                }
            }
        }
    }

    /// After the first `[`: a `[table]` or a `[[list]]` header; returns the new current table.
    fn table_or_list(&mut self, root: &mut Node) -> R<Vec<PathStep>> {
        let is_list = self.is('[');
        if is_list {
            self.adv();
        }
        let mut path: Vec<PathStep> = vec![];
        loop {
            while self.is(' ') || self.is('\t') {
                self.adv();
            }
            let kw = self.keyword()?;
            while self.is(' ') || self.is('\t') {
                self.adv();
            }
            let ctx = resolve(root, &path);
            if self.is(']') {
                if is_list {
                    if !ctx.has(&kw) {
                        let mut list = Node::table();
                        list.kind = Kind::List;
                        ctx.entries.push((kw.clone(), list));
                    }
                    let node = ctx.get_mut(&kw).expect("present");
                    match node.kind {
                        Kind::InlineList => return self.err("Can't extend an inline array"),
                        Kind::List => {
                            node.items.push(Node::table());
                            path.push(PathStep::Key(kw));
                            path.push(PathStep::Last);
                        }
                        _ => return self.err("Can't redefine an existing key"),
                    }
                    self.adv();
                    if !self.is(']') {
                        return self.err("Unexpected character, expected whitespace, . or ]");
                    }
                    self.adv();
                } else {
                    if let Some(existing) = ctx.get_mut(&kw) {
                        if !existing.is_table() || existing.declared() {
                            return self.err("Can't redefine existing key");
                        }
                        existing.kind = Kind::Table { declared: true };
                    } else {
                        let mut t = Node::table();
                        t.kind = Kind::Table { declared: true };
                        ctx.entries.push((kw.clone(), t));
                    }
                    path.push(PathStep::Key(kw));
                    self.adv();
                }
                self.whitespace_to_eol()?;
                return Ok(path);
            } else if self.is('.') {
                if !ctx.has(&kw) {
                    ctx.entries.push((kw.clone(), Node::table()));
                    path.push(PathStep::Key(kw));
                } else {
                    let node = ctx.get_mut(&kw).expect("present");
                    match node.kind {
                        Kind::Table { .. } => path.push(PathStep::Key(kw)),
                        Kind::List => {
                            path.push(PathStep::Key(kw));
                            path.push(PathStep::Last);
                        }
                        Kind::InlineList if is_list => {
                            return self.err("Can't extend an inline array")
                        }
                        Kind::InlineTable if is_list => {
                            return self.err("Can't extend an inline table")
                        }
                        _ if is_list => return self.err("Can't redefine an existing key"),
                        _ => return self.err("Can't redefine existing key"),
                    }
                }
                self.adv();
            } else {
                return self.err("Unexpected character, expected whitespace, . or ]");
            }
        }
    }

    fn value(&mut self) -> R<Node> {
        let c = self.c();
        if c == END {
            return self.err("Key without value");
        }
        match char::from_u32(c).unwrap_or('\0') {
            '"' => {
                self.adv();
                if self.is('"') {
                    self.adv();
                    if self.is('"') {
                        self.adv();
                        return Ok(Node::leaf(Value::String(self.multi_string()?)));
                    }
                    return Ok(Node::leaf(Value::String(String::new())));
                }
                Ok(Node::leaf(Value::String(self.basic_string()?)))
            }
            '\'' => {
                self.adv();
                if self.is('\'') {
                    self.adv();
                    if self.is('\'') {
                        self.adv();
                        return Ok(Node::leaf(Value::String(self.literal_multi_string()?)));
                    }
                    return Ok(Node::leaf(Value::String(String::new())));
                }
                Ok(Node::leaf(Value::String(self.literal_string()?)))
            }
            '-' | '+' => {
                let sign = self.chars[self.i];
                self.adv();
                if self.is('i') {
                    self.adv();
                    return self.inf(sign == '-');
                } else if self.is('n') {
                    self.adv();
                    return self.nan();
                }
                let mut buf = String::from(sign);
                self.no_under()?;
                if self.is('0') {
                    buf.push('0');
                    self.adv();
                    if self.is('.') {
                        buf.push('.');
                        self.adv();
                        self.no_under()?;
                        return self.float(buf);
                    } else if self.is('e') || self.is('E') {
                        buf.push('e');
                        self.adv();
                        return self.exponent_sign(buf);
                    }
                    return Ok(integer(&buf));
                }
                self.integer(buf)
            }
            'i' => {
                self.adv();
                self.inf(false)
            }
            'n' => {
                self.adv();
                self.nan()
            }
            't' => self.word("true", Value::Boolean(true)),
            'f' => self.word("false", Value::Boolean(false)),
            '[' => {
                self.adv();
                self.inline_list()
            }
            '{' => {
                self.adv();
                self.inline_table()
            }
            _ if is_digit(c) => self.number_or_datetime(),
            _ => self.err(
                "Unexpected character, expecting string, number, datetime, boolean, inline array or inline table",
            ),
        }
    }

    fn word(&mut self, word: &str, v: Value) -> R<Node> {
        for ch in word.chars() {
            if !self.is(ch) {
                return self.err("Invalid boolean, expected true or false");
            }
            self.adv();
        }
        Ok(Node::leaf(v))
    }

    fn inf(&mut self, negative: bool) -> R<Node> {
        for ch in ['n', 'f'] {
            if !self.is(ch) {
                return self.err("Unexpected character, expected \"inf\", \"+inf\" or \"-inf\"");
            }
            self.adv();
        }
        Ok(Node::leaf(Value::SpecialFloat(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })))
    }

    fn nan(&mut self) -> R<Node> {
        for ch in ['a', 'n'] {
            if !self.is(ch) {
                return self.err("Unexpected character, expected \"nan\"");
            }
            self.adv();
        }
        Ok(Node::leaf(Value::SpecialFloat(f64::NAN)))
    }

    /// The reference's `parseNoUnder`: the current character may not start a number's tail.
    fn no_under(&self) -> R<()> {
        if self.is('_') || self.is('.') || self.is('e') || self.is('E') {
            return self.err("Unexpected character, expected digit");
        } else if self.at_end_of_word() {
            return self.err("Incomplete number");
        }
        Ok(())
    }

    fn no_under_radix(&self) -> R<()> {
        if self.is('_') || self.is('.') {
            return self.err("Unexpected character, expected digit");
        } else if self.at_end_of_word() {
            return self.err("Incomplete number");
        }
        Ok(())
    }

    fn integer(&mut self, mut buf: String) -> R<Node> {
        loop {
            let c = self.c();
            if is_digit(c) {
                buf.push(self.chars[self.i]);
                self.adv();
            } else if self.is('_') {
                self.adv();
                self.no_under()?;
            } else if self.is('e') || self.is('E') {
                buf.push('e');
                self.adv();
                return self.exponent_sign(buf);
            } else if self.is('.') {
                buf.push('.');
                self.adv();
                self.no_under()?;
                return self.float(buf);
            } else {
                return Ok(integer(&buf));
            }
        }
    }

    fn float(&mut self, mut buf: String) -> R<Node> {
        loop {
            if self.is('_') {
                self.adv();
                self.no_under()?;
            } else if is_digit(self.c()) {
                buf.push(self.chars[self.i]);
                self.adv();
            } else if self.is('e') || self.is('E') {
                buf.push('e');
                self.adv();
                return self.exponent_sign(buf);
            } else {
                return Ok(float(&buf));
            }
        }
    }

    fn exponent_sign(&mut self, mut buf: String) -> R<Node> {
        if is_digit(self.c()) {
        } else if self.is('-') || self.is('+') {
            buf.push(self.chars[self.i]);
            self.adv();
            self.no_under()?;
        } else {
            return self.err("Unexpected character, expected -, + or digit");
        }
        loop {
            if is_digit(self.c()) {
                buf.push(self.chars[self.i]);
                self.adv();
            } else if self.is('_') {
                self.adv();
                self.no_under()?;
            } else {
                return Ok(float(&buf));
            }
        }
    }

    fn number_or_datetime(&mut self) -> R<Node> {
        let mut buf = String::new();
        if self.is('0') {
            buf.push('0');
            self.adv();
            let radix = match self.c() {
                c if c == 'b' as u32 => Some(2),
                c if c == 'o' as u32 => Some(8),
                c if c == 'x' as u32 => Some(16),
                _ => None,
            };
            if let Some(radix) = radix {
                self.adv();
                self.no_under_radix()?;
                let mut digits = String::new();
                loop {
                    let c = self.c();
                    let ok = match radix {
                        2 => c == '0' as u32 || c == '1' as u32,
                        8 => (0x30..=0x37).contains(&c),
                        _ => is_hexit(c),
                    };
                    if ok {
                        digits.push(self.chars[self.i]);
                        self.adv();
                    } else if self.is('_') {
                        self.adv();
                        self.no_under_radix()?;
                    } else {
                        break;
                    }
                }
                return Ok(radix_integer(&digits, radix));
            }
            if self.is('.') {
                return self.integer(buf);
            }
            if is_digit(self.c()) {
                // Two digits starting with 0: only a date or a time can follow.
                loop {
                    if buf.len() < 4 {
                        if is_digit(self.c()) {
                            buf.push(self.chars[self.i]);
                            self.adv();
                        } else if self.is(':') {
                            return self.only_time(buf);
                        } else {
                            return self.err("Expected digit while parsing year part of a date");
                        }
                    } else if self.is('-') {
                        return self.datetime(buf);
                    } else {
                        return self.err("Expected hyphen (-) while parsing year part of date");
                    }
                }
            }
            return Ok(integer(&buf));
        }
        loop {
            if self.is('_') {
                self.adv();
                self.no_under()?;
                return self.integer(buf);
            } else if is_digit(self.c()) {
                buf.push(self.chars[self.i]);
                self.adv();
                if buf.len() > 4 {
                    return self.integer(buf);
                }
            } else if self.is('e') || self.is('E') {
                buf.push('e');
                self.adv();
                return self.exponent_sign(buf);
            } else if self.is('.') {
                buf.push('.');
                self.adv();
                self.no_under()?;
                return self.float(buf);
            } else if self.is('-') {
                return self.datetime(buf);
            } else if self.is(':') {
                return self.only_time(buf);
            } else {
                return Ok(integer(&buf));
            }
        }
    }

    /// A date (the year is in `year`, the current character is the `-` after it), then maybe a time.
    fn datetime(&mut self, year: String) -> R<Node> {
        if year.len() < 4 {
            return self.err("Years less than 1000 must be zero padded to four characters");
        }
        self.adv();
        let mut month = String::new();
        loop {
            if self.is('-') {
                if month.len() < 2 {
                    return self.err("Months less than 10 must be zero padded to two characters");
                }
                self.adv();
                break;
            } else if is_digit(self.c()) {
                month.push(self.chars[self.i]);
                self.adv();
            } else {
                return self.err("Incomplete datetime");
            }
        }
        let mut day = String::new();
        loop {
            if self.is('T') || self.is(' ') {
                if day.len() < 2 {
                    return self.err("Days less than 10 must be zero padded to two characters");
                }
                break;
            } else if self.at_end_of_word() {
                let text = format!("{year}-{month}-{day}");
                return self.checked_date(text, &month, &day, None);
            } else if is_digit(self.c()) {
                day.push(self.chars[self.i]);
                self.adv();
            } else {
                return self.err("Incomplete datetime");
            }
        }
        let sep_at = self.i;
        self.adv();
        if self.at_end_of_word() {
            // `1979-05-27 ` followed by a comment: a date; the space is left alone.
            let _ = sep_at;
            let text = format!("{year}-{month}-{day}");
            return self.checked_date(text, &month, &day, None);
        }
        let mut hour = String::new();
        loop {
            if self.is(':') {
                if hour.len() < 2 {
                    return self.err("Hours less than 10 must be zero padded to two characters");
                }
                self.adv();
                break;
            } else if is_digit(self.c()) {
                hour.push(self.chars[self.i]);
                self.adv();
            } else {
                return self.err("Incomplete datetime");
            }
        }
        let (min, sec) = self.min_sec("Incomplete datetime")?;
        let mut text = format!("{year}-{month}-{day}T{hour}:{min}:{sec}");
        if self.is('.') {
            let mut frac = String::from(".");
            self.adv();
            loop {
                if is_digit(self.c()) {
                    frac.push(self.chars[self.i]);
                    self.adv();
                } else if frac.len() == 1 {
                    return self.err("Expected digit in milliseconds");
                } else {
                    break;
                }
            }
            text.push_str(&frac);
        }
        if self.is('-') || self.is('+') {
            text.push(self.chars[self.i]);
            self.adv();
            let mut tz = String::new();
            for i in 0..5 {
                if i == 2 {
                    if !self.is(':') {
                        return self.err("Unexpected character in datetime, expected colon");
                    }
                } else if !is_digit(self.c()) {
                    return self.err("Unexpected character in datetime, expected digit");
                }
                tz.push(self.chars[self.i]);
                self.adv();
            }
            text.push_str(&tz);
        } else if self.is('Z') {
            text.push('Z');
            self.adv();
        } else if !self.at_end_of_word() {
            return self.err(
                "Unexpected character in datetime, expected period (.), minus (-), plus (+) or Z",
            );
        }
        self.checked_date(text, &month, &day, Some((&hour, &min, &sec)))
    }

    fn min_sec(&mut self, incomplete: &str) -> R<(String, String)> {
        let mut min = String::new();
        loop {
            if min.len() < 2 && is_digit(self.c()) {
                min.push(self.chars[self.i]);
                self.adv();
            } else if min.len() == 2 && self.is(':') {
                self.adv();
                break;
            } else {
                return self.err(incomplete);
            }
        }
        let mut sec = String::new();
        while sec.len() < 2 {
            if !is_digit(self.c()) {
                return self.err(incomplete);
            }
            sec.push(self.chars[self.i]);
            self.adv();
        }
        Ok((min, sec))
    }

    fn only_time(&mut self, hour: String) -> R<Node> {
        if hour.len() < 2 {
            return self.err("Hours less than 10 must be zero padded to two characters");
        }
        self.adv();
        let (min, sec) = self.min_sec("Incomplete time")?;
        let mut text = format!("{hour}:{min}:{sec}");
        if self.is('.') {
            self.adv();
            let mut frac = String::new();
            loop {
                if is_digit(self.c()) {
                    frac.push(self.chars[self.i]);
                    self.adv();
                } else if self.at_end_of_word() {
                    if frac.is_empty() {
                        return self.err("Expected digit in milliseconds");
                    }
                    break;
                } else {
                    return self.err(
                        "Unexpected character in datetime, expected period (.), minus (-), plus (+) or Z",
                    );
                }
            }
            text = format!("{text}.{frac}");
        }
        if !valid_time(&hour, &min, &sec) {
            return self.err("Invalid Datetime");
        }
        Ok(Node::leaf(Value::Datetime(text)))
    }

    fn checked_date(
        &self,
        text: String,
        month: &str,
        day: &str,
        time: Option<(&str, &str, &str)>,
    ) -> R<Node> {
        let m: u32 = month.parse().unwrap_or(0);
        let d: u32 = day.parse().unwrap_or(0);
        let mut ok =
            month.len() == 2 && day.len() == 2 && (1..=12).contains(&m) && (1..=31).contains(&d);
        if let Some((h, mi, s)) = time {
            ok &= valid_time(h, mi, s);
        }
        if !ok {
            return self.err("Invalid Datetime");
        }
        Ok(Node::leaf(Value::Datetime(text)))
    }

    fn escape(&mut self) -> R<String> {
        let c = self.c();
        let simple = match char::from_u32(c).unwrap_or('\0') {
            'b' => Some('\u{8}'),
            't' => Some('\t'),
            'n' => Some('\n'),
            'f' => Some('\u{c}'),
            'r' => Some('\r'),
            '"' => Some('"'),
            '\\' => Some('\\'),
            _ => None,
        };
        if let Some(ch) = simple {
            self.adv();
            return Ok(ch.to_string());
        }
        let len = if c == 'u' as u32 {
            4
        } else if c == 'U' as u32 {
            8
        } else {
            return self.err(format!("Unknown escape character: {c}"));
        };
        self.adv();
        let mut hex = String::new();
        while hex.len() < len {
            if !is_hexit(self.c()) {
                return self.err("Invalid character in unicode sequence, expected hex");
            }
            hex.push(self.chars[self.i]);
            self.adv();
        }
        let cp = u32::from_str_radix(&hex, 16).unwrap_or(u32::MAX);
        if (0xD800..=0xDFFF).contains(&cp) {
            return self.err("Invalid unicode, character in range 0xD800 - 0xDFFF is reserved");
        }
        match char::from_u32(cp) {
            Some(ch) => Ok(ch.to_string()),
            None => self.err(format!("Invalid code point {cp}")),
        }
    }

    fn control_char_error<T>(&self) -> R<T> {
        self.err(format!(
            "Control characters (codes < 0x1f and 0x7f) are not allowed in strings, use \\u{:04x} instead",
            self.c()
        ))
    }

    /// After the opening `"`: up to and past the closing `"`.
    fn basic_string(&mut self) -> R<String> {
        let mut buf = String::new();
        loop {
            let c = self.c();
            if c == '\\' as u32 {
                self.adv();
                buf.push_str(&self.escape()?);
            } else if c == '"' as u32 {
                self.adv();
                return Ok(buf);
            } else if self.at_end_of_line() {
                return self.err("Unterminated string");
            } else if c == 0x7F || (c <= 0x1F && c != 0x09) {
                return self.control_char_error();
            } else {
                buf.push(self.chars[self.i]);
                self.adv();
            }
        }
    }

    fn literal_string(&mut self) -> R<String> {
        let mut buf = String::new();
        loop {
            let c = self.c();
            if c == '\'' as u32 {
                self.adv();
                return Ok(buf);
            } else if self.at_end_of_line() {
                return self.err("Unterminated string");
            } else if c == 0x7F || (c <= 0x1F && c != 0x09) {
                return self.control_char_error();
            } else {
                buf.push(self.chars[self.i]);
                self.adv();
            }
        }
    }

    fn multi_string(&mut self) -> R<String> {
        while self.is('\r') {
            self.adv();
        }
        if self.is('\n') {
            self.adv();
        }
        let mut buf = String::new();
        loop {
            let c = self.c();
            if c == '\\' as u32 {
                self.adv();
                if self.is('\r') || self.is('\n') {
                    self.adv();
                    self.multi_trim();
                } else if self.is(' ') || self.is('\t') {
                    self.adv();
                    loop {
                        if self.is(' ') || self.is('\t') {
                            self.adv();
                        } else if self.is('\r') || self.is('\n') {
                            self.adv();
                            self.multi_trim();
                            break;
                        } else {
                            return self.err("Can't escape whitespace");
                        }
                    }
                } else {
                    buf.push_str(&self.escape()?);
                }
            } else if c == '"' as u32 {
                self.adv();
                if self.is('"') {
                    self.adv();
                    if self.is('"') {
                        self.adv();
                        return Ok(buf);
                    }
                    buf.push_str("\"\"");
                } else {
                    buf.push('"');
                }
            } else if c == END {
                return self.err("Unterminated multi-line string");
            } else if c == 0x7F || (c <= 0x1F && c != 0x09 && c != 0x0A && c != 0x0D) {
                return self.control_char_error();
            } else {
                buf.push(self.chars[self.i]);
                self.adv();
            }
        }
    }

    fn multi_trim(&mut self) {
        while self.is('\n') || self.is(' ') || self.is('\t') || self.is('\r') {
            self.adv();
        }
    }

    fn literal_multi_string(&mut self) -> R<String> {
        while self.is('\r') {
            self.adv();
        }
        if self.is('\n') {
            self.adv();
        }
        let mut buf = String::new();
        loop {
            let c = self.c();
            if c == '\'' as u32 {
                self.adv();
                if self.is('\'') {
                    self.adv();
                    if self.is('\'') {
                        self.adv();
                        return Ok(buf);
                    }
                    buf.push_str("''");
                } else {
                    buf.push('\'');
                }
            } else if c == END {
                return self.err("Unterminated multi-line string");
            } else if c == 0x7F || (c <= 0x1F && c != 0x09 && c != 0x0A && c != 0x0D) {
                return self.control_char_error();
            } else {
                buf.push(self.chars[self.i]);
                self.adv();
            }
        }
    }

    fn inline_list(&mut self) -> R<Node> {
        let mut list = Node::table();
        list.kind = Kind::InlineList;
        let mut list_type: Option<&'static str> = None;
        loop {
            // parseInlineList
            loop {
                let c = self.c();
                if c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A {
                    self.adv();
                } else if c == END {
                    return self.err("Unterminated inline array");
                } else if c == '#' as u32 {
                    self.comment();
                    self.adv();
                } else if c == ']' as u32 {
                    self.adv();
                    return Ok(list);
                } else {
                    break;
                }
            }
            let v = self.value()?;
            let t = v.toml_type();
            match list_type {
                Some(lt) if lt != t => {
                    return self.err(format!(
                        "Inline lists must be a single type, not a mix of {lt} and {t}"
                    ))
                }
                _ => list_type = Some(t),
            }
            list.items.push(v);
            // parseInlineListNext
            loop {
                let c = self.c();
                if c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A {
                    self.adv();
                } else if c == '#' as u32 {
                    self.comment();
                    self.adv();
                } else if c == ',' as u32 {
                    self.adv();
                    break;
                } else if c == ']' as u32 {
                    break;
                } else {
                    return self.err(
                        "Invalid character, expected whitespace, comma (,) or close bracket (])",
                    );
                }
            }
        }
    }

    fn inline_table(&mut self) -> R<Node> {
        let mut table = Node::table();
        table.kind = Kind::InlineTable;
        loop {
            loop {
                let c = self.c();
                if c == 0x20 || c == 0x09 {
                    self.adv();
                } else if c == END || c == '#' as u32 || c == 0x0A || c == 0x0D {
                    return self.err("Unterminated inline array");
                } else if c == '}' as u32 {
                    self.adv();
                    return Ok(table);
                } else {
                    break;
                }
            }
            let (keys, value) = self.assign()?;
            self.record_assign(&mut table, keys, value)?;
            loop {
                let c = self.c();
                if c == 0x20 || c == 0x09 {
                    self.adv();
                } else if c == END || c == '#' as u32 || c == 0x0A || c == 0x0D {
                    return self.err("Unterminated inline array");
                } else if c == ',' as u32 {
                    self.adv();
                    break;
                } else if c == '}' as u32 {
                    break;
                } else {
                    return self.err(
                        "Invalid character, expected whitespace, comma (,) or close bracket (])",
                    );
                }
            }
        }
    }
}

fn valid_time(h: &str, m: &str, s: &str) -> bool {
    let h: u32 = h.parse().unwrap_or(99);
    let m: u32 = m.parse().unwrap_or(99);
    let s: u32 = s.parse().unwrap_or(99);
    (h < 24 && m < 60 && s < 60) || (h == 24 && m == 0 && s == 0)
}

#[derive(Debug, Clone)]
enum PathStep {
    Key(String),
    Last,
}

fn resolve<'a>(root: &'a mut Node, path: &[PathStep]) -> &'a mut Node {
    let mut node = root;
    for step in path {
        node = match step {
            PathStep::Key(k) => node.get_mut(k).expect("path exists"),
            PathStep::Last => node.items.last_mut().expect("list has an item"),
        };
    }
    node
}

/// The reference's `Integer(buf)`: a number when safe, else a BigInt wrapped to 64 bits.
fn integer(buf: &str) -> Node {
    let n: f64 = buf.parse().unwrap_or(f64::NAN);
    let n = if n == 0.0 { 0.0 } else { n };
    if n.is_finite() && n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_991.0 {
        return Node::leaf(Value::Integer(n));
    }
    // BigInt.asIntN(64, value): two's complement wrap of the exact decimal value.
    let (neg, digits) = match buf.as_bytes().first() {
        Some(b'-') => (true, &buf[1..]),
        Some(b'+') => (false, &buf[1..]),
        _ => (false, buf),
    };
    let mut acc: u64 = 0;
    for d in digits.bytes() {
        acc = acc.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
    }
    let v = if neg { acc.wrapping_neg() } else { acc };
    Node::leaf(Value::BigInt(v as i64))
}

fn radix_integer(digits: &str, radix: u32) -> Node {
    let mut acc: u128 = 0;
    let mut wide = false;
    for d in digits.chars() {
        let v = u128::from(d.to_digit(radix).unwrap_or(0));
        match acc
            .checked_mul(u128::from(radix))
            .and_then(|a| a.checked_add(v))
        {
            Some(a) => acc = a,
            None => {
                wide = true;
                acc = acc.wrapping_mul(u128::from(radix)).wrapping_add(v);
            }
        }
    }
    if !wide && acc <= 9_007_199_254_740_991 {
        return Node::leaf(Value::Integer(acc as f64));
    }
    Node::leaf(Value::BigInt(acc as u64 as i64))
}

fn float(buf: &str) -> Node {
    let n: f64 = buf.parse().unwrap_or(f64::NAN);
    Node::leaf(Value::Float(if n == 0.0 { 0.0 } else { n }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Value {
        parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }
    fn bad(s: &str) {
        assert!(parse(s).is_err(), "{s:?} should not parse");
    }

    #[test]
    fn the_reference_quirks() {
        bad("a = [1, \"x\"]");
        bad("a = [1, 1.0]");
        ok("a = [[1],[\"x\"]]");
        bad("\u{feff}a = 1");
        ok("a = {b = 1,}");
        bad("a = {b = 1,\n}");
        bad("a = {,}");
        ok("a = [1,]");
        bad("a = [,]");
        assert_eq!(
            ok("a = 9007199254740993").get("a"),
            Some(&Value::BigInt(9007199254740993))
        );
        assert_eq!(
            ok("a = 9007199254740991").get("a"),
            Some(&Value::Integer(9007199254740991.0))
        );
        assert_eq!(ok("a = 10.0").get("a"), Some(&Value::Float(10.0)));
        assert_eq!(ok("a = 1e2").get("a"), Some(&Value::Float(100.0)));
        ok("a.b=1\n[a]\nc=1");
        bad("[a]\nb=1\n[a]\nc=1");
        bad("a=1\na=2");
        bad("a = 1\rb=2");
        bad("a = 00");
        bad("a = 0_1");
        bad("a = 1__0");
        ok("a = 1_000");
        bad("a = [1.0, inf]");
        ok("a = [inf, nan]");
        ok("[[a]]\n[a.b]\nc=1");
        bad("a=[]\n[[a]]");
        bad("[a]\n[[a]]");
        ok("a = 1979-05-27 07:32:00");
        bad("a = 2021-13-45");
        bad("a = \"\\x41\"");
        bad("x = \"\u{1}\"");
        ok("x = 'a\tb'");
        bad("k = \"\"\"\"\"\"\"\" ");
        assert_eq!(
            ok("a = \"\"\"\nx\"\"\"").get("a"),
            Some(&Value::String("x".into()))
        );
        assert_eq!(
            ok("a = \"\"\"a\\\n   b\"\"\"").get("a"),
            Some(&Value::String("ab".into()))
        );
        ok("a = [\n1,\n# c\n2\n]");
        ok("\"a b\" = 1");
        bad("a = 1.");
        bad("= 1");
    }
}
