//! Strings: basic, literal and multi-line, with the reference's escapes and control-character
//! errors.

use super::*;

impl Parser {
    pub(super) fn escape(&mut self) -> R<String> {
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

    pub(super) fn control_char_error<T>(&self) -> R<T> {
        self.err(format!(
            "Control characters (codes < 0x1f and 0x7f) are not allowed in strings, use \\u{:04x} instead",
            self.c()
        ))
    }

    /// After the opening `"`: up to and past the closing `"`.
    pub(super) fn basic_string(&mut self) -> R<String> {
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

    pub(super) fn literal_string(&mut self) -> R<String> {
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

    pub(super) fn multi_string(&mut self) -> R<String> {
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

    pub(super) fn multi_trim(&mut self) {
        while self.is('\n') || self.is(' ') || self.is('\t') || self.is('\r') {
            self.adv();
        }
    }

    pub(super) fn literal_multi_string(&mut self) -> R<String> {
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
}
