//! The recent history (`h`): the records newest first, one row each, and the record under
//! the cursor whole with its timeline. Record text is bus text: wrapped and cut by `text`,
//! sanitized there and again by the frame's scrub.

use ratatui::layout::Rect;
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;

use super::super::history::{self, History};
use super::super::scroll::Scroll;
use super::{body_and_footer, truncate, wrap, ACCENT, DIM, WARN};

pub(super) fn history(frame: &mut Frame, h: &History, area: Rect) {
    let detail = h.detail.then(|| h.current()).flatten();
    let title = match detail {
        Some(r) => format!(" History · {} ", truncate(&r.correlation_id, 40)),
        None => format!(" History · the latest {} ", h.records.len()),
    };
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(DIM))
        .title(title);
    let width = area.width.saturating_sub(4) as usize;
    let mut lines: Vec<Line> = Vec::new();
    let mut focus = (0, 0);
    let hints;
    if let Some(r) = detail {
        for (label, text) in history::timeline(r) {
            let lead = format!("{label:<10}");
            for (k, l) in wrap(&text, width.saturating_sub(11).max(8))
                .into_iter()
                .enumerate()
            {
                lines.push(Line::from(vec![
                    Span::styled(
                        if k == 0 { lead.clone() } else { " ".repeat(10) },
                        Style::new().fg(DIM),
                    ),
                    Span::raw(" "),
                    Span::raw(l),
                ]));
            }
        }
        hints = "Esc back to the list · r reload · h close";
    } else {
        if let Some(s) = &h.status {
            lines.push(Line::raw(""));
            for l in wrap(s, width) {
                lines.push(Line::styled(l, Style::new().fg(WARN)));
            }
        }
        for (i, r) in h.records.iter().enumerate() {
            let here = i == h.cursor;
            if here {
                focus = (lines.len(), lines.len());
            }
            let when = r
                .asked_at
                .get(..19)
                .unwrap_or(&r.asked_at)
                .replace('T', " ");
            let kind = if r.kind == "approval" { "⚑" } else { "?" };
            let end = [r.reason.clone(), history::decided_by(r)]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" · ");
            let head = format!("{when} {kind} {end:<22} ");
            let room = width.saturating_sub(head.chars().count() + 2);
            lines.push(Line::from(vec![
                Span::styled(if here { "● " } else { "  " }, Style::new().fg(ACCENT)),
                Span::styled(head, Style::new().fg(DIM)),
                Span::styled(
                    truncate(&history::what(r), room),
                    if here {
                        Style::new().bold()
                    } else {
                        Style::new()
                    },
                ),
            ]));
        }
        hints = "Enter for the timeline · ↑/↓ to move · r reload · h close";
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    body_and_footer(
        frame,
        inner,
        lines,
        focus,
        false,
        &Scroll::default(),
        None,
        hints,
    );
}
