//! Inline arrays and inline tables, with the reference's one-type-per-array rule and its
//! accepted trailing comma.

use super::*;

impl Parser {
    pub(super) fn inline_list(&mut self) -> R<Node> {
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

    pub(super) fn inline_table(&mut self) -> R<Node> {
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
