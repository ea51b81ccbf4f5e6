//! Numbers, dates and times: the reference's integer, float, radix, inf/nan and datetime
//! states, with its BigInt wrap for integers outside the safe range.

use super::*;

impl Parser {
    pub(super) fn inf(&mut self, negative: bool) -> R<Node> {
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

    pub(super) fn nan(&mut self) -> R<Node> {
        for ch in ['a', 'n'] {
            if !self.is(ch) {
                return self.err("Unexpected character, expected \"nan\"");
            }
            self.adv();
        }
        Ok(Node::leaf(Value::SpecialFloat(f64::NAN)))
    }

    /// The reference's `parseNoUnder`: the current character may not start a number's tail.
    pub(super) fn no_under(&self) -> R<()> {
        if self.is('_') || self.is('.') || self.is('e') || self.is('E') {
            return self.err("Unexpected character, expected digit");
        } else if self.at_end_of_word() {
            return self.err("Incomplete number");
        }
        Ok(())
    }

    pub(super) fn no_under_radix(&self) -> R<()> {
        if self.is('_') || self.is('.') {
            return self.err("Unexpected character, expected digit");
        } else if self.at_end_of_word() {
            return self.err("Incomplete number");
        }
        Ok(())
    }

    pub(super) fn integer(&mut self, mut buf: String) -> R<Node> {
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

    pub(super) fn float(&mut self, mut buf: String) -> R<Node> {
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

    pub(super) fn exponent_sign(&mut self, mut buf: String) -> R<Node> {
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

    pub(super) fn number_or_datetime(&mut self) -> R<Node> {
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
    pub(super) fn datetime(&mut self, year: String) -> R<Node> {
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

    pub(super) fn min_sec(&mut self, incomplete: &str) -> R<(String, String)> {
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

    pub(super) fn only_time(&mut self, hour: String) -> R<Node> {
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

    pub(super) fn checked_date(
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
}

pub(super) fn valid_time(h: &str, m: &str, s: &str) -> bool {
    let h: u32 = h.parse().unwrap_or(99);
    let m: u32 = m.parse().unwrap_or(99);
    let s: u32 = s.parse().unwrap_or(99);
    (h < 24 && m < 60 && s < 60) || (h == 24 && m == 0 && s == 0)
}

/// The reference's `Integer(buf)`: a number when safe, else a BigInt wrapped to 64 bits.
pub(super) fn integer(buf: &str) -> Node {
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

pub(super) fn radix_integer(digits: &str, radix: u32) -> Node {
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

pub(super) fn float(buf: &str) -> Node {
    let n: f64 = buf.parse().unwrap_or(f64::NAN);
    Node::leaf(Value::Float(if n == 0.0 { 0.0 } else { n }))
}
