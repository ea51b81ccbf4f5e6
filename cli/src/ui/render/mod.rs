//! Drawing the UI with ratatui: a status bar, then the pending list or one request's dialog
//! (laid out as Gemini CLI's AskUserDialog lays it out), then the notice, wrapped. Reads the
//! state, never changes it; everything fits in an 80×24 terminal and scrolls to the focused
//! row.
//!
//! - this file: the frame (status bar, notice rows), the scrolled body with its markers and
//!   hint line, shared by every view;
//! - [`list`]: the waiting list, grouped by project;
//! - [`question`]: a question's dialog (tabs, choices, text fields, the review);
//! - [`approval`]: an approval's dialog (the details scroll, the buttons stay);
//! - [`details`]: what an approval's tool call would do, per kind of details;
//! - [`text`]: wrapping and cutting bus text to a width, sanitized;
//! - [`history`]: the recent history (`h`) and a record's timeline.

mod approval;
mod details;
mod history;
mod list;
mod question;
#[cfg(test)]
mod tests;
mod text;

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::app::{App, Ask, Conn, Entry, Tone, View};
use super::scroll::Scroll;
use crate::term::sanitize;
pub use text::{truncate, wrap};

pub(super) const ACCENT: Color = Color::Cyan;
pub(super) const GOOD: Color = Color::Green;
pub(super) const WARN: Color = Color::Yellow;
pub(super) const BAD: Color = Color::Red;
pub(super) const DIM: Color = Color::DarkGray;

pub fn draw(frame: &mut Frame, app: &App, now: Instant, socket: &str) {
    let area = frame.area();
    if area.height < 3 || area.width < 20 {
        frame.render_widget(Paragraph::new("askbus ui: enlarge the terminal"), area);
        return;
    }
    let top = Rect { height: 1, ..area };
    let notice = notice_lines(app, now, area);
    let bottom = Rect {
        y: area.bottom() - notice.height,
        height: notice.height,
        ..area
    };
    let main = Rect {
        y: area.y + 1,
        height: area.height - 1 - notice.height,
        ..area
    };
    status_bar(frame, app, now, top);
    notice_bar(frame, notice, bottom);
    if let Some(h) = &app.history {
        history::history(frame, h, main);
        scrub(frame.buffer_mut());
        return;
    }
    match app.open_entry() {
        Some(entry) => match &entry.ask {
            Ask::Question { dialog, .. } => question::dialog(frame, entry, dialog, now, main),
            Ask::Approval { request, decision } => {
                approval::dialog(frame, entry, request, decision, now, main)
            }
        },
        None => list::list(frame, app, now, main, socket),
    }
    scrub(frame.buffer_mut());
}

/// The last line of defence: no cell reaches the terminal holding a control or bidi
/// character, whatever path its text took (bus text is sanitized where it is laid out; this
/// catches what a future change forgets, and text the person pasted).
fn scrub(buf: &mut Buffer) {
    for cell in buf.content.iter_mut() {
        if cell.symbol().contains(crate::term::is_unsafe) {
            let clean = sanitize(cell.symbol()).into_owned();
            cell.set_symbol(&clean);
        }
    }
}

fn status_bar(frame: &mut Frame, app: &App, now: Instant, area: Rect) {
    let mut spans = vec![
        Span::styled(
            " askbus ui ",
            Style::new().bg(ACCENT).fg(Color::Black).bold(),
        ),
        Span::raw(" "),
    ];
    let state = match &app.conn {
        Conn::Connected => Span::styled("● connected", Style::new().fg(GOOD)),
        Conn::Connecting => Span::styled("◌ connecting…", Style::new().fg(WARN)),
        Conn::Down { retry_at, .. } => {
            let retry = crate::duration::short(retry_at.saturating_duration_since(now));
            let mut text = format!("✗ disconnected · retrying in {retry}");
            if 12 + text.width() > area.width as usize {
                // Narrow: the countdown is the news, the words give way.
                text = format!("✗ offline · retry in {retry}");
            }
            Span::styled(text, Style::new().fg(BAD).bold())
        }
    };
    spans.push(state);
    let approvals = app.entries.iter().filter(|e| e.is_approval()).count();
    let questions = app.entries.len() - approvals;
    let count = |n: usize, what: &str| match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    };
    let mut right = match (questions, approvals) {
        (0, 0) => "no questions pending ".to_owned(),
        (q, 0) => format!("{} pending ", count(q, "question")),
        (0, a) => format!("{} pending ", count(a, "approval")),
        (q, a) => format!(
            "{} · {} pending ",
            count(q, "question"),
            count(a, "approval")
        ),
    };
    let used: usize = spans.iter().map(|s| s.content.width()).sum();
    if used + 1 + right.width() > area.width as usize {
        // Narrow: the count alone ("3 pending"), or nothing rather than run into the state.
        right = match app.entries.len() {
            0 => String::new(),
            n => format!("{n} pending "),
        };
        if used + 1 + right.width() > area.width as usize {
            right.clear();
        }
    }
    let pad = (area.width as usize).saturating_sub(used + right.width());
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(right, Style::new().fg(DIM)));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The notice, wrapped to the width (never cut while it fits in a third of the screen), and
/// the reminder of the other requests beside its first row.
struct NoticeLines {
    rows: Vec<String>,
    tone: Tone,
    right: String,
    height: u16,
}

fn notice_lines(app: &App, now: Instant, area: Rect) -> NoticeLines {
    let width = area.width as usize;
    let notice = app.notice.as_ref().filter(|n| n.live(now));
    let others = match app.view {
        View::List => 0,
        View::Dialog(_) => app.entries.len().saturating_sub(1),
    };
    let mut right = String::new();
    if others > 0 {
        right = format!("{others} more waiting · Ctrl+L list ");
        if notice.is_some() && width < right.width() + 30 {
            // Narrow: the notice is the news; the reminder says the least it can.
            right = format!("+{others} · Ctrl+L ");
        }
    }
    let Some(n) = notice else {
        return NoticeLines {
            rows: Vec::new(),
            tone: Tone::Info,
            right,
            height: 1,
        };
    };
    let room = width.saturating_sub(right.width() + 2);
    let mut rows = wrap(&n.text, room);
    // The dialog keeps two thirds of the screen at least; a notice taller than the rest
    // (a pasted essay of an error) ends in "…".
    let most = ((area.height as usize).saturating_sub(1) / 3).max(1);
    if rows.len() > most {
        rows.truncate(most);
        let last = rows.pop().unwrap_or_default();
        rows.push(truncate(&format!("{last} …"), room));
    }
    NoticeLines {
        height: rows.len().max(1) as u16,
        rows,
        tone: n.tone,
        right,
    }
}

fn notice_bar(frame: &mut Frame, notice: NoticeLines, area: Rect) {
    let width = area.width as usize;
    let color = match notice.tone {
        Tone::Info => Color::Reset,
        Tone::Good => GOOD,
        Tone::Warn => WARN,
        Tone::Bad => BAD,
    };
    let mut lines = Vec::new();
    for (i, row) in notice.rows.iter().enumerate() {
        let mut spans = vec![Span::styled(format!(" {row}"), Style::new().fg(color))];
        if i == 0 && !notice.right.is_empty() {
            let used = 1 + row.width();
            spans.push(Span::raw(
                " ".repeat(width.saturating_sub(used + notice.right.width())),
            ));
            spans.push(Span::styled(notice.right.clone(), Style::new().fg(ACCENT)));
        }
        lines.push(Line::from(spans));
    }
    if lines.is_empty() && !notice.right.is_empty() {
        lines.push(Line::from(vec![
            Span::raw(" ".repeat(width.saturating_sub(notice.right.width()))),
            Span::styled(notice.right, Style::new().fg(ACCENT)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The top of `area` tall enough for a bordered box of `body_lines`, a blank row and the hint
/// row (all of `area` when they do not fit: then the body scrolls).
pub(super) fn fit(area: Rect, body_lines: usize) -> Rect {
    let want = body_lines.saturating_add(4).min(u16::MAX as usize) as u16;
    Rect {
        height: area.height.min(want),
        ..area
    }
}

/// [`scrolled`] in all of `inner` but a hint line at the bottom (and a blank row above it).
#[allow(clippy::too_many_arguments)]
pub(super) fn body_and_footer(
    frame: &mut Frame,
    inner: Rect,
    lines: Vec<Line>,
    focus: (usize, usize),
    prefer_top: bool,
    scroll: &Scroll,
    cursor: Option<(usize, usize)>,
    hints: &str,
) {
    if inner.height < 2 || inner.width < 4 {
        return;
    }
    let text_area = Rect {
        x: inner.x + 1,
        width: inner.width - 2,
        ..inner
    };
    let footer_area = Rect {
        y: inner.bottom() - 1,
        height: 1,
        ..text_area
    };
    // One blank row above the footer, as the reference leaves.
    let body_h = inner.height.saturating_sub(2).max(1) as usize;
    let body = Rect {
        height: body_h as u16,
        ..text_area
    };
    scrolled(frame, body, &lines, focus, prefer_top, scroll, cursor);
    footer(frame, footer_area, hints);
}

/// The hint line.
pub(super) fn footer(frame: &mut Frame, area: Rect, hints: &str) {
    frame.render_widget(
        Paragraph::new(Line::styled(
            fit_hints(hints, area.width as usize),
            Style::new().fg(DIM),
        )),
        area,
    );
}

/// The hint line in `width` columns: said in fewer words when narrow ("Enter to select · ↑/↓
/// to navigate · Esc to cancel" becomes "Enter select · ↑/↓ move · Esc cancel"), so the
/// keys at its end (Esc) stay on screen; cut only when even that does not fit.
pub fn fit_hints(hints: &str, width: usize) -> String {
    let mut h = hints.to_owned();
    for (long, short) in [
        (" to ", " "),
        ("navigate", "move"),
        ("switch questions", "switch"),
        ("edit answers", "edit"),
        (" with this reason", ""),
    ] {
        if h.width() <= width {
            break;
        }
        h = h.replace(long, short);
    }
    truncate(&h, width)
}

/// Renders `lines` into `body` scrolled by `scroll` so rows `focus.0..focus.1` are visible
/// (unless scrolled by hand), with a "▲ N more" / "▼ N more" row where lines are hidden, and
/// the terminal cursor at `cursor` (line index, column) if it is on screen.
pub(super) fn scrolled(
    frame: &mut Frame,
    body: Rect,
    lines: &[Line],
    focus: (usize, usize),
    prefer_top: bool,
    scroll: &Scroll,
    cursor: Option<(usize, usize)>,
) {
    let view = scroll.view(lines.len(), body.height as usize, focus, prefer_top);
    let mut rows: Vec<Line> = Vec::with_capacity(body.height as usize);
    if view.above > 0 {
        rows.push(more_marker("▲", view.above, "above", "PgUp/Home"));
    }
    let first_row = rows.len();
    rows.extend(lines.iter().skip(view.top).take(view.shown).cloned());
    if view.below > 0 {
        rows.push(more_marker("▼", view.below, "below", "PgDn/End"));
    }
    frame.render_widget(Paragraph::new(rows), body);
    if let Some((line, col)) = cursor {
        if line >= view.top && line < view.top + view.shown {
            frame.set_cursor_position(Position {
                x: body.x + (col as u16).min(body.width.saturating_sub(1)),
                y: body.y + (first_row + line - view.top) as u16,
            });
        }
    }
}

/// "▲ 3 more lines above (PgUp/Home)".
fn more_marker(arrow: &str, n: usize, where_: &str, keys: &str) -> Line<'static> {
    let lines = if n == 1 { "line" } else { "lines" };
    Line::styled(
        format!("{arrow} {n} more {lines} {where_} ({keys})"),
        Style::new().fg(ACCENT),
    )
}

#[derive(Default)]
pub(super) struct Body {
    lines: Vec<Line<'static>>,
    focus: Option<(usize, usize)>,
    cursor: Option<(usize, usize)>,
}

impl Body {
    fn push(&mut self, line: Line<'static>) {
        self.lines.push(line);
    }
}

/// "9m 58s left", as the person reads the time a request has before it times out.
pub(super) fn time_left(e: &Entry, now: Instant) -> String {
    let left = e.deadline.saturating_duration_since(now);
    if left.is_zero() {
        "timing out".into()
    } else {
        format!("{} left", crate::duration::short(left))
    }
}
