//! Fitting bus text to a width: word-wrapping and cutting with "…", both sanitizing first
//! (escapes become visible stand-ins before anything is measured).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use crate::term::sanitize;

/// Word-wraps `text` (sanitized line by line, as it may be bus text) to `width` columns,
/// keeping its line breaks and breaking words that are longer than a line.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for para in text.split('\n') {
        // Bus text: escapes become visible stand-ins before anything is measured.
        let para = sanitize(para);
        let mut line = String::new();
        let mut line_w = 0;
        for word in para.split(' ') {
            let w = word.width();
            let sep = usize::from(!line.is_empty() || line_w > 0);
            if line_w + sep + w <= width {
                if sep == 1 {
                    line.push(' ');
                }
                line.push_str(word);
                line_w += sep + w;
                continue;
            }
            if line_w > 0 {
                out.push(std::mem::take(&mut line));
            }
            // A word longer than the line is cut into line-sized pieces.
            let mut piece_w = 0;
            for ch in word.chars() {
                let cw = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
                if piece_w + cw > width && piece_w > 0 {
                    out.push(std::mem::take(&mut line));
                    piece_w = 0;
                }
                line.push(ch);
                piece_w += cw;
            }
            line_w = piece_w;
        }
        out.push(line);
    }
    out
}

/// Cuts `s` (sanitized, as it may be bus text) to `width` columns, ending in "…" when cut.
pub fn truncate(s: &str, width: usize) -> String {
    let s = sanitize(s);
    if s.width() <= width {
        return s.into_owned();
    }
    let mut out = String::new();
    let mut w = 0;
    for ch in s.chars() {
        let cw = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        out.push(ch);
        w += cw;
    }
    out.push('…');
    out
}

/// Hard-wraps one line of styled pieces (each sanitized here, tabs expanded to four spaces,
/// as code and diffs use them) at `width` columns, keeping every space (indentation in code
/// and JSON means something); continuation rows start with `indent` spaces.
pub fn chop(pieces: &[(&str, Style)], width: usize, indent: usize) -> Vec<Line<'static>> {
    let width = width.max(indent + 2);
    let mut lines = Vec::new();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut run = String::new();
    let mut run_style = Style::new();
    let mut col = 0;
    let flush = |spans: &mut Vec<Span<'static>>, run: &mut String, style: Style| {
        if !run.is_empty() {
            spans.push(Span::styled(std::mem::take(run), style));
        }
    };
    for (text, style) in pieces {
        let text = sanitize(&text.replace('\t', "    ")).into_owned();
        if *style != run_style {
            flush(&mut spans, &mut run, run_style);
            run_style = *style;
        }
        for ch in text.chars() {
            let cw = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
            if col + cw > width && col > indent {
                flush(&mut spans, &mut run, run_style);
                lines.push(Line::from(std::mem::take(&mut spans)));
                spans.push(Span::raw(" ".repeat(indent)));
                col = indent;
            }
            run.push(ch);
            col += cw;
        }
    }
    flush(&mut spans, &mut run, run_style);
    lines.push(Line::from(spans));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_keeps_newlines() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("a\nb", 10), vec!["a", "b"]);
        assert_eq!(wrap("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(wrap("", 3), vec![""]);
        assert_eq!(wrap("日本語 です", 6), vec!["日本語", "です"]);
    }

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("hello world", 6), "hello…");
    }

    fn plain(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn chop_keeps_spaces_and_styles() {
        let red = Style::new().fg(ratatui::style::Color::Red);
        let lines = chop(&[("-", red), ("    let x\t= 1;", red)], 8, 1);
        assert_eq!(plain(&lines), ["-    let", "  x    =", "  1;"]);
        assert!(lines
            .iter()
            .flat_map(|l| &l.spans)
            .filter(|s| !s.content.trim().is_empty())
            .all(|s| s.style == red));
        assert_eq!(plain(&chop(&[("", Style::new())], 10, 0)), [""]);
        assert_eq!(
            plain(&chop(&[("a\x1b[2Jb", Style::new())], 20, 0)),
            ["a␛[2Jb"]
        );
    }
}
