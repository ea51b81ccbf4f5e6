//! A small line editor for the dialog's text fields (the "Other" row and text questions):
//! the text, a cursor on a grapheme boundary, the usual readline keys, and the layout that
//! wraps it to a width and says where the cursor lands.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineInput {
    text: String,
    /// Byte offset into `text`, always on a grapheme boundary.
    cursor: usize,
}

impl LineInput {
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
    }

    /// Inserts at the cursor. Pasted line breaks are kept as `\n` (an answer may span
    /// lines); other control characters are dropped so they cannot reach the screen.
    pub fn insert_str(&mut self, s: &str) {
        let clean: String = s
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .chars()
            .filter(|c| *c == '\n' || !c.is_control())
            .collect();
        self.text.insert_str(self.cursor, &clean);
        self.cursor += clean.len();
    }

    /// Applies an editing key. Returns whether the key was an editing key (consumed).
    pub fn handle_key(&mut self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            KeyCode::Char(c) if !ctrl && !alt => {
                let mut buf = [0u8; 4];
                self.insert_str(c.encode_utf8(&mut buf));
            }
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = self.text.len(),
            KeyCode::Char('b') if ctrl => self.cursor = self.prev_boundary(),
            KeyCode::Char('f') if ctrl => self.cursor = self.next_boundary(),
            KeyCode::Char('u') if ctrl => {
                self.text.replace_range(..self.cursor, "");
                self.cursor = 0;
            }
            KeyCode::Char('k') if ctrl => self.text.truncate(self.cursor),
            KeyCode::Char('w') if ctrl => self.delete_word_back(),
            KeyCode::Char('h') if ctrl => self.backspace(),
            KeyCode::Char('b') if alt => self.cursor = self.prev_word(),
            KeyCode::Char('f') if alt => self.cursor = self.next_word(),
            KeyCode::Char('d') if alt => {
                let end = self.next_word();
                self.text.replace_range(self.cursor..end, "");
            }
            KeyCode::Backspace if alt || ctrl => self.delete_word_back(),
            KeyCode::Backspace => self.backspace(),
            KeyCode::Delete => {
                let end = self.next_boundary();
                self.text.replace_range(self.cursor..end, "");
            }
            KeyCode::Left if ctrl || alt => self.cursor = self.prev_word(),
            KeyCode::Right if ctrl || alt => self.cursor = self.next_word(),
            KeyCode::Left => self.cursor = self.prev_boundary(),
            KeyCode::Right => self.cursor = self.next_boundary(),
            KeyCode::Home => self.cursor = 0,
            KeyCode::End => self.cursor = self.text.len(),
            _ => return false,
        }
        true
    }

    fn backspace(&mut self) {
        let start = self.prev_boundary();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    fn delete_word_back(&mut self) {
        let start = self.prev_word();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    fn prev_boundary(&self) -> usize {
        self.text[..self.cursor]
            .grapheme_indices(true)
            .next_back()
            .map_or(0, |(i, _)| i)
    }

    fn next_boundary(&self) -> usize {
        self.text[self.cursor..]
            .graphemes(true)
            .next()
            .map_or(self.cursor, |g| self.cursor + g.len())
    }

    /// The start of the word before the cursor (skipping the spaces right before it).
    fn prev_word(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8())
    }

    /// The end of the word after the cursor.
    fn next_word(&self) -> usize {
        let after = &self.text[self.cursor..];
        let skip = after.len() - after.trim_start().len();
        after[skip..]
            .char_indices()
            .find(|(_, c)| c.is_whitespace())
            .map_or(self.text.len(), |(i, _)| self.cursor + skip + i)
    }

    /// The text broken into rows of at most `width` columns (hard-wrapped, so each grapheme
    /// keeps its place), and the cursor's (row, column).
    pub fn layout(&self, width: usize) -> (Vec<String>, (usize, usize)) {
        let width = width.max(2);
        let mut rows = vec![String::new()];
        let mut col = 0;
        let mut cursor = (0, 0);
        for (i, g) in self.text.grapheme_indices(true) {
            if i == self.cursor {
                cursor = (rows.len() - 1, col);
            }
            if g == "\n" {
                rows.push(String::new());
                col = 0;
                continue;
            }
            let w = g.width();
            if col + w > width {
                rows.push(String::new());
                col = 0;
                if i == self.cursor {
                    cursor = (rows.len() - 1, 0);
                }
            }
            rows.last_mut().expect("rows is never empty").push_str(g);
            col += w;
        }
        if self.cursor == self.text.len() {
            if col >= width {
                rows.push(String::new());
                col = 0;
            }
            cursor = (rows.len() - 1, col);
        }
        (rows, cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn typed(s: &str) -> LineInput {
        let mut input = LineInput::default();
        for c in s.chars() {
            input.handle_key(&key(KeyCode::Char(c)));
        }
        input
    }

    #[test]
    fn edits_at_the_cursor() {
        let mut i = typed("hello world");
        i.handle_key(&key(KeyCode::Home));
        i.handle_key(&key(KeyCode::Right));
        i.handle_key(&key(KeyCode::Char('X')));
        assert_eq!(i.text(), "hXello world");
        i.handle_key(&key(KeyCode::Backspace));
        i.handle_key(&key(KeyCode::Delete));
        assert_eq!(i.text(), "hllo world");
        i.handle_key(&key(KeyCode::End));
        i.handle_key(&ctrl('w'));
        assert_eq!(i.text(), "hllo ");
        i.handle_key(&ctrl('u'));
        assert_eq!(i.text(), "");
        assert!(!i.handle_key(&key(KeyCode::Enter)));
    }

    #[test]
    fn moves_by_grapheme_not_byte() {
        let mut i = typed("e\u{301}é🇫🇷");
        i.handle_key(&key(KeyCode::Backspace));
        assert_eq!(i.text(), "e\u{301}é");
        i.handle_key(&key(KeyCode::Left));
        i.handle_key(&key(KeyCode::Backspace));
        assert_eq!(i.text(), "é");
    }

    #[test]
    fn paste_keeps_line_breaks_and_drops_controls() {
        let mut i = LineInput::default();
        i.insert_str("a\r\nb\x1b[31m\tc");
        assert_eq!(i.text(), "a\nb[31mc");
    }

    #[test]
    fn layout_wraps_and_places_the_cursor() {
        let i = typed("abcdef");
        let (rows, cursor) = i.layout(4);
        assert_eq!(rows, vec!["abcd", "ef"]);
        assert_eq!(cursor, (1, 2));
        let i = typed("abcd");
        assert_eq!(i.layout(4), (vec!["abcd".into(), String::new()], (1, 0)));
        let mut i = typed("ab");
        i.insert_str("\ncd");
        i.handle_key(&key(KeyCode::Home));
        assert_eq!(i.layout(10), (vec!["ab".into(), "cd".into()], (0, 0)));
        // Wide characters never straddle a row.
        let i = typed("日本語");
        assert_eq!(i.layout(5).0, vec!["日本", "語"]);
    }
}
