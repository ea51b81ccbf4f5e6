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

mod inline;
mod number;
mod string;
#[cfg(test)]
mod tests;

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
                    return Ok(number::integer(&buf));
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
