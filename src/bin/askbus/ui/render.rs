//! Drawing the UI with ratatui: a status bar, then the pending list or one request's dialog
//! (laid out as Gemini CLI's AskUserDialog lays it out), then a notice line. Reads the state,
//! never changes it; everything fits in an 80×24 terminal and scrolls to the focused row.

use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::app::{App, Conn, Entry, Tone, View};
use super::dialog::{Dialog, Kind, Row, Widget};
use super::encode::Pick;
use super::scroll::Scroll;
use crate::term::{self, sanitize};

const ACCENT: Color = Color::Cyan;
const GOOD: Color = Color::Green;
const WARN: Color = Color::Yellow;
const BAD: Color = Color::Red;
const DIM: Color = Color::DarkGray;

pub fn draw(frame: &mut Frame, app: &App, now: Instant, socket: &str) {
    let area = frame.area();
    if area.height < 3 || area.width < 20 {
        frame.render_widget(Paragraph::new("askbus ui: enlarge the terminal"), area);
        return;
    }
    let top = Rect { height: 1, ..area };
    let bottom = Rect {
        y: area.bottom() - 1,
        height: 1,
        ..area
    };
    let main = Rect {
        y: area.y + 1,
        height: area.height - 2,
        ..area
    };
    status_bar(frame, app, now, top);
    notice_bar(frame, app, now, bottom);
    match app.open_entry() {
        Some(entry) => dialog(frame, entry, now, main),
        None => list(frame, app, now, main, socket),
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
    spans.push(match &app.conn {
        Conn::Connected => Span::styled("● connected", Style::new().fg(GOOD)),
        Conn::Connecting => Span::styled("◌ connecting…", Style::new().fg(WARN)),
        Conn::Down { retry_at, .. } => Span::styled(
            format!(
                "✗ disconnected · retrying in {}",
                crate::duration::short(retry_at.saturating_duration_since(now))
            ),
            Style::new().fg(BAD).bold(),
        ),
    });
    let n = app.entries.len();
    let right = match n {
        0 => "no questions pending ".to_owned(),
        1 => "1 question pending ".to_owned(),
        n => format!("{n} questions pending "),
    };
    let used: usize = spans.iter().map(|s| s.content.width()).sum();
    let pad = (area.width as usize).saturating_sub(used + right.width());
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(right, Style::new().fg(DIM)));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn notice_bar(frame: &mut Frame, app: &App, now: Instant, area: Rect) {
    let mut spans = Vec::new();
    if let Some(n) = app.notice.as_ref().filter(|n| n.live(now)) {
        let color = match n.tone {
            Tone::Info => Color::Reset,
            Tone::Good => GOOD,
            Tone::Warn => WARN,
            Tone::Bad => BAD,
        };
        spans.push(Span::styled(
            format!(" {}", sanitize(&n.text)),
            Style::new().fg(color),
        ));
    }
    if app.view != View::List {
        let others = app.entries.len().saturating_sub(1);
        if others > 0 {
            let right = format!("{others} more waiting · Ctrl+L list ");
            let used: usize = spans.iter().map(|s| s.content.width()).sum();
            let room = (area.width as usize).saturating_sub(right.width());
            if used > room {
                spans = vec![Span::raw(truncate(
                    &spans[0].content,
                    room.saturating_sub(1),
                ))];
            }
            let used: usize = spans.iter().map(|s| s.content.width()).sum();
            spans.push(Span::raw(" ".repeat(room.saturating_sub(used))));
            spans.push(Span::styled(right, Style::new().fg(ACCENT)));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn list(frame: &mut Frame, app: &App, now: Instant, area: Rect, socket: &str) {
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(DIM))
        .title(if app.filter.is_empty() {
            " Pending questions ".to_owned()
        } else {
            format!(" Pending questions · {} ", app.filter)
        });
    let width = area.width.saturating_sub(4) as usize;
    let mut lines: Vec<Line> = Vec::new();
    let mut focus = (0, 0);
    if app.entries.is_empty() {
        lines.push(Line::raw(""));
        match &app.conn {
            Conn::Down { error, .. } => {
                lines.push(Line::styled(
                    "askbusd is not reachable:",
                    Style::new().fg(BAD),
                ));
                for l in wrap(error, width) {
                    lines.push(Line::styled(l, Style::new().fg(BAD)));
                }
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    "Questions will show here once it is back.",
                    Style::new().fg(DIM),
                ));
            }
            _ => {
                lines.push(Line::raw("No questions pending."));
                lines.push(Line::raw(""));
                for l in wrap(&format!("Waiting for agents on {socket}"), width) {
                    lines.push(Line::styled(l, Style::new().fg(DIM)));
                }
                if let Some(n) = app.piped {
                    lines.push(Line::raw(""));
                    let text = format!(
                        "{n} bytes came on standard input (a pipe): printed when you quit."
                    );
                    for l in wrap(&text, width) {
                        lines.push(Line::styled(l, Style::new().fg(DIM)));
                    }
                }
            }
        }
    }
    // Grouped by project (the entries are kept in group order); headers only once some
    // question says what it is about.
    let grouped = app.entries.iter().any(|e| e.project().is_some());
    for (i, e) in app.entries.iter().enumerate() {
        let here = i == app.list_cursor;
        if grouped && (i == 0 || app.entries[i - 1].project() != e.project()) {
            let n = app
                .entries
                .iter()
                .filter(|x| x.project() == e.project())
                .count();
            let name = e
                .project()
                .map_or("(no project)".into(), crate::term::sanitize);
            if i > 0 {
                lines.push(Line::raw(""));
            }
            lines.push(Line::styled(
                truncate(&format!("▸ {name} ({n})"), width),
                Style::new().fg(ACCENT).bold(),
            ));
        }
        if here {
            focus.0 = lines.len();
        }
        let marker = if here { "● " } else { "  " };
        let style = if here {
            Style::new().fg(ACCENT).bold()
        } else {
            Style::new()
        };
        let mut first = vec![
            Span::styled(marker, Style::new().fg(ACCENT)),
            Span::styled(format!("{}. {}", i + 1, e.who()), style),
            Span::styled(format!(" · {}", time_left(e, now)), Style::new().fg(DIM)),
        ];
        if e.stale {
            first.push(Span::styled(" (reconnecting…)", Style::new().fg(WARN)));
        }
        lines.push(Line::from(first));
        let about = e.about();
        if !about.is_empty() {
            lines.push(Line::from(vec![
                Span::raw("     "),
                Span::styled(
                    truncate(&about, width.saturating_sub(5)),
                    Style::new().italic(),
                ),
            ]));
        }
        let qs = &e.dialog.questions;
        if let Some(q) = qs.first() {
            let more = match qs.len() {
                1 => String::new(),
                n => format!("  (+{} more)", n - 1),
            };
            let text = q.text.lines().next().unwrap_or("");
            let body = format!("{} {text}", chip_text(&q.header));
            lines.push(Line::from(vec![
                Span::raw("     "),
                Span::styled(
                    truncate(&body, width.saturating_sub(5 + more.width())),
                    Style::new().fg(DIM),
                ),
                Span::styled(more, Style::new().fg(DIM)),
            ]));
        }
        if here {
            focus.1 = lines.len();
        }
    }
    let hints = if app.entries.is_empty() {
        "q to quit"
    } else {
        "Enter to open · ↑/↓ to navigate · q to quit"
    };
    let area = fit(area, lines.len());
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

/// The top of `area` tall enough for a bordered box of `body_lines`, a blank row and the hint
/// row (all of `area` when they do not fit: then the body scrolls).
fn fit(area: Rect, body_lines: usize) -> Rect {
    let want = body_lines.saturating_add(4).min(u16::MAX as usize) as u16;
    Rect {
        height: area.height.min(want),
        ..area
    }
}

/// Renders `lines` scrolled by `scroll` so rows `focus.0..focus.1` are visible (unless
/// scrolled by hand), a "▲ N more" / "▼ N more" row where lines are hidden, a hint line at the
/// bottom, and the terminal cursor at `cursor` (line index, column) if it is on screen.
#[allow(clippy::too_many_arguments)]
fn body_and_footer(
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
    let footer = Rect {
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
    let view = scroll.view(lines.len(), body_h, focus, prefer_top);
    let mut rows: Vec<Line> = Vec::with_capacity(body_h);
    if view.above > 0 {
        rows.push(more_marker("▲", view.above, "above", "PgUp/Home"));
    }
    let first_row = rows.len();
    rows.extend(lines.into_iter().skip(view.top).take(view.shown));
    if view.below > 0 {
        rows.push(more_marker("▼", view.below, "below", "PgDn/End"));
    }
    frame.render_widget(Paragraph::new(rows), body);
    frame.render_widget(
        Paragraph::new(Line::styled(
            truncate(hints, footer.width as usize),
            Style::new().fg(DIM),
        )),
        footer,
    );
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

fn dialog(frame: &mut Frame, entry: &Entry, now: Instant, area: Rect) {
    // The countdown keeps its room; the name gives way (cut with "…"), then " asks".
    let left = format!(" {} ", time_left(entry, now));
    let room = (area.width as usize)
        .saturating_sub(2 + left.width() + 1)
        .saturating_sub(" asks ".len() + 1);
    let who = term::sanitize(&entry.who()).into_owned();
    let title = if room >= 4 {
        vec![
            Span::raw(" "),
            Span::styled(truncate(&who, room), Style::new().bold()),
            Span::raw(" asks "),
        ]
    } else {
        Vec::new()
    };
    let mut block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(ACCENT))
        .title(Line::from(title))
        .title(Line::from(left).right_aligned());
    if entry.stale {
        block = block.title_bottom(Line::styled(
            " offline: answers wait for the reconnect ",
            Style::new().fg(WARN),
        ));
    }
    let width = area.width.saturating_sub(4) as usize;
    let d = &entry.dialog;
    let mut body = Body::default();
    // Who is asking, about what: project, agent and title above the questions.
    let about: Vec<String> = [entry.project().map(str::to_owned), Some(entry.about())]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| crate::term::sanitize(&s).into_owned())
        .collect();
    if !about.is_empty() {
        for l in wrap(&about.join(" · "), width) {
            body.push(Line::styled(l, Style::new().fg(ACCENT).italic()));
        }
        body.push(Line::raw(""));
    }
    if d.has_review() {
        body.push(tabs_line(d, width));
        body.push(Line::raw(""));
    }
    if d.on_review() {
        review(d, width, &mut body);
    } else if d.tab < d.questions.len() {
        question(d, width, &mut body);
    } else {
        body.push(Line::styled("(no questions)", Style::new().fg(DIM)));
    }
    let Body {
        lines,
        focus,
        cursor,
    } = body;
    let focus = focus.unwrap_or((0, lines.len().min(1)));
    let area = fit(area, lines.len());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    body_and_footer(
        frame,
        inner,
        lines,
        focus,
        prefer_top(d),
        &entry.scroll,
        cursor,
        &hints(d),
    );
}

/// Whether the dialog's focus is its first row (or it has none): then the view keeps the top
/// (tabs, header, question) on screen whenever the focus fits with it.
fn prefer_top(d: &Dialog) -> bool {
    match d.cursor_edges() {
        None => true,
        Some((first, _)) => first,
    }
}

#[derive(Default)]
struct Body {
    lines: Vec<Line<'static>>,
    focus: Option<(usize, usize)>,
    cursor: Option<(usize, usize)>,
}

impl Body {
    fn push(&mut self, line: Line<'static>) {
        self.lines.push(line);
    }
}

fn hints(d: &Dialog) -> String {
    let editing = d.is_editing();
    let several = d.has_review();
    if d.on_review() {
        return "Enter to submit · Tab/Shift+Tab to edit answers · Esc to cancel".into();
    }
    let primary = if editing {
        "Enter to submit"
    } else {
        "Enter to select"
    };
    let nav = match (several, editing) {
        (true, true) => Some("Tab/Shift+Tab to switch questions"),
        (true, false) => Some("←/→ to switch questions"),
        (false, true) => None,
        (false, false) => Some("↑/↓ to navigate"),
    };
    let mut parts = vec![primary];
    if let Some(nav) = nav {
        parts.push(nav);
    }
    parts.push("Esc to cancel");
    parts.join(" · ")
}

fn tabs_line(d: &Dialog, width: usize) -> Line<'static> {
    let mut spans = vec![Span::styled("← ", Style::new().fg(DIM))];
    for (i, q) in d.questions.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" │ ", Style::new().fg(DIM)));
        }
        let icon = if d.answer(i).is_some() { "✓" } else { "□" };
        spans.push(Span::styled(format!("{icon} "), Style::new().fg(DIM)));
        spans.push(tab_label(&q.header, i == d.tab));
    }
    spans.push(Span::styled(" │ ", Style::new().fg(DIM)));
    spans.push(Span::styled("≡ ", Style::new().fg(DIM)));
    spans.push(tab_label("Review", d.on_review()));
    spans.push(Span::styled(" →", Style::new().fg(DIM)));
    let total: usize = spans.iter().map(|s| s.content.width()).sum();
    if total > width {
        // Too narrow for every header: name only the tab in view.
        let label = if d.on_review() {
            "Review".to_owned()
        } else {
            d.questions[d.tab].header.clone()
        };
        return Line::from(vec![
            Span::styled(
                format!("← {}/{} ", d.tab + 1, d.questions.len() + 1),
                Style::new().fg(DIM),
            ),
            tab_label(&truncate(&label, width.saturating_sub(10)), true),
            Span::styled(" →", Style::new().fg(DIM)),
        ]);
    }
    Line::from(spans)
}

fn tab_label(header: &str, current: bool) -> Span<'static> {
    if current {
        Span::styled(
            sanitize(header).into_owned(),
            Style::new()
                .fg(GOOD)
                .add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        )
    } else {
        Span::styled(truncate(header, 16), Style::new().fg(DIM))
    }
}

fn chip_text(header: &str) -> String {
    if header.is_empty() {
        String::new()
    } else {
        format!("[{header}]")
    }
}

fn question(d: &Dialog, width: usize, body: &mut Body) {
    let q = &d.questions[d.tab];
    if !q.header.is_empty() {
        body.push(Line::from(Span::styled(
            format!(" {} ", truncate(&q.header, width.saturating_sub(2))),
            Style::new().bg(ACCENT).fg(Color::Black).bold(),
        )));
    }
    for l in wrap(&q.text, width) {
        body.push(Line::styled(l, Style::new().bold()));
    }
    if q.is_multi() {
        body.push(Line::styled(
            "(Select all that apply)",
            Style::new().fg(DIM).italic(),
        ));
    }
    body.push(Line::raw(""));
    match (&q.kind, &d.widgets[d.tab]) {
        (Kind::Text, Widget::Text(input)) => {
            let start = body.lines.len();
            let prefix = "> ";
            if input.is_empty() {
                body.cursor = Some((start, prefix.len()));
                body.push(Line::from(vec![
                    Span::styled(prefix, Style::new().fg(GOOD)),
                    Span::styled(sanitize(&q.placeholder).into_owned(), Style::new().fg(DIM)),
                ]));
            } else {
                let (rows, (r, c)) = input.layout(width.saturating_sub(prefix.len()));
                body.cursor = Some((start + r, prefix.len() + c));
                for (i, row) in rows.into_iter().enumerate() {
                    let lead = if i == 0 { prefix } else { "  " };
                    body.push(Line::from(vec![
                        Span::styled(lead, Style::new().fg(GOOD)),
                        Span::raw(row),
                    ]));
                }
            }
            body.focus = Some((start, body.lines.len()));
        }
        (
            Kind::Choice { options, multi, .. },
            Widget::Choice {
                cursor,
                picked,
                checked,
                other,
            },
        ) => {
            let rows = q.rows();
            let numbered = rows.iter().filter(|r| **r != Row::Done).count();
            let num_w = numbered.to_string().len();
            for (i, row) in rows.iter().enumerate() {
                let here = i == *cursor;
                let start = body.lines.len();
                let marker = Span::styled(if here { "● " } else { "  " }, Style::new().fg(ACCENT));
                let number = match row {
                    Row::Done => " ".repeat(num_w + 2),
                    _ => format!("{:>num_w$}. ", i + 1),
                };
                let mut lead = vec![
                    marker,
                    Span::styled(
                        number,
                        Style::new().fg(if here { ACCENT } else { Color::Reset }),
                    ),
                ];
                let is_checked = match row {
                    Row::Option(o) => checked[*o],
                    Row::All => checked.iter().all(|c| *c),
                    Row::Other => !other.text().trim().is_empty(),
                    Row::Done => false,
                };
                if *multi && *row != Row::Done {
                    lead.push(Span::styled(
                        if is_checked { "[x] " } else { "[ ] " },
                        Style::new().fg(if is_checked { GOOD } else { DIM }),
                    ));
                }
                let indent: usize = lead.iter().map(|s| s.content.width()).sum();
                let label_w = width.saturating_sub(indent).max(1);
                let label_style = if here {
                    Style::new().fg(ACCENT).bold()
                } else {
                    Style::new()
                };
                let (label, desc) = match row {
                    Row::Option(o) => (options[*o].label.clone(), options[*o].description.clone()),
                    Row::All => ("All of the above".into(), "Select all options".into()),
                    Row::Done => ("Done".into(), "Finish selection".into()),
                    Row::Other => (String::new(), String::new()),
                };
                if *row == Row::Other {
                    let single_picked = !*multi && *picked == Some(Pick::Other);
                    if other.is_empty() {
                        if here {
                            body.cursor = Some((start, indent));
                        }
                        let mut spans = lead;
                        spans.push(Span::styled(
                            sanitize(&q.placeholder).into_owned(),
                            Style::new().fg(DIM),
                        ));
                        body.push(Line::from(spans));
                    } else {
                        let (rows, (r, c)) = other.layout(label_w);
                        if here {
                            body.cursor = Some((start + r, indent + c));
                        }
                        let n = rows.len();
                        for (k, text) in rows.into_iter().enumerate() {
                            let mut spans = if k == 0 {
                                lead.clone()
                            } else {
                                vec![Span::raw(" ".repeat(indent))]
                            };
                            spans.push(Span::styled(text, label_style));
                            if single_picked && !here && k + 1 == n {
                                spans.push(Span::styled(" ✓", Style::new().fg(GOOD)));
                            }
                            body.push(Line::from(spans));
                        }
                    }
                } else {
                    let picked_here = !*multi
                        && matches!(row, Row::Option(o) if *picked == Some(Pick::Option(*o)));
                    let style = if picked_here {
                        Style::new().fg(GOOD).bold()
                    } else if *row == Row::Done {
                        label_style.bold()
                    } else {
                        label_style
                    };
                    let wrapped = wrap(&label, label_w);
                    let n = wrapped.len();
                    for (k, text) in wrapped.into_iter().enumerate() {
                        let mut spans = if k == 0 {
                            lead.clone()
                        } else {
                            vec![Span::raw(" ".repeat(indent))]
                        };
                        spans.push(Span::styled(text, style));
                        if picked_here && k + 1 == n {
                            spans.push(Span::styled(" ✓", Style::new().fg(GOOD)));
                        }
                        body.push(Line::from(spans));
                    }
                    if !desc.is_empty() {
                        for text in wrap(&desc, label_w) {
                            body.push(Line::from(vec![
                                Span::raw(" ".repeat(indent)),
                                Span::styled(text, Style::new().fg(DIM)),
                            ]));
                        }
                    }
                }
                if here {
                    body.focus = Some((start, body.lines.len()));
                }
            }
        }
        _ => {}
    }
}

fn review(d: &Dialog, width: usize, body: &mut Body) {
    body.push(Line::styled("Review your answers:", Style::new().bold()));
    body.push(Line::raw(""));
    let answers = d.answers();
    let unanswered = d.questions.len() - answers.len();
    if unanswered > 0 {
        body.push(Line::styled(
            format!(
                "⚠ You have {unanswered} unanswered question{}",
                if unanswered > 1 { "s" } else { "" }
            ),
            Style::new().fg(WARN),
        ));
        body.push(Line::raw(""));
    }
    let start = body.lines.len();
    for (i, q) in d.questions.iter().enumerate() {
        let lead = format!("{} → ", sanitize(&q.header));
        let lead_w = lead.width();
        let (text, style) = match answers.get(&i) {
            Some(a) => (a.clone(), Style::new()),
            None => ("(not answered)".to_owned(), Style::new().fg(WARN)),
        };
        let wrapped = wrap(&text, width.saturating_sub(lead_w).max(8));
        for (k, l) in wrapped.into_iter().enumerate() {
            let lead = if k == 0 {
                Span::styled(lead.clone(), Style::new().fg(DIM))
            } else {
                Span::raw(" ".repeat(lead_w))
            };
            body.push(Line::from(vec![lead, Span::styled(l, style)]));
        }
    }
    body.focus = Some((0, body.lines.len().min(start + 1)));
}

/// "9m 58s left", as the person reads the time a request has before it times out.
fn time_left(e: &Entry, now: Instant) -> String {
    let left = e.deadline.saturating_duration_since(now);
    if left.is_zero() {
        "timing out".into()
    } else {
        format!("{} left", crate::duration::short(left))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::app::BusUpdate;
    use askbusd::client::UiEvent;
    use askbusd::protocol::{ProducerInfo, UiRequest};
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use serde_json::json;
    use std::time::Duration;

    fn app_with(questions: serde_json::Value) -> App {
        let mut app = App::new();
        let now = Instant::now();
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        app.on_bus(
            BusUpdate::Event(UiEvent::Request(UiRequest {
                correlation_id: "c".into(),
                questions,
                timeout_ms: 90_000,
                producer: ProducerInfo {
                    client: Some("agent".into()),
                    pid: Some(1),
                    uid: 0,
                },
                context: None,
                node: None,
            })),
            now,
        );
        app
    }

    fn text(app: &App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, app, Instant::now(), "/s")).unwrap();
        let buf = t.backend().buffer();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol().to_owned())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn long_multiselect() -> serde_json::Value {
        let desc = "A description long enough to wrap onto a second line at eighty columns, \
                    which many real options have.";
        json!([{"question": "Line one of the question.\nLine two.\nLine three.",
            "header": "Big", "type": "choice", "multiSelect": true,
            "options": [
                {"label": "First", "description": desc},
                {"label": "Second", "description": desc},
                {"label": "Third", "description": desc},
                {"label": "Fourth", "description": desc}]}])
    }

    #[test]
    fn tall_dialogs_scroll_to_the_focused_row_and_keep_the_hints() {
        let mut app = app_with(long_multiselect());
        let top = text(&app, 80, 24);
        assert!(top.contains("Line one of the question."), "{top}");
        assert!(top.contains("Enter to select"), "{top}");
        assert!(!top.contains("Finish selection"), "{top}");
        // Up from the first row wraps to Done, the last.
        app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
        let bottom = text(&app, 80, 24);
        assert!(bottom.contains("●    Done"), "{bottom}");
        assert!(bottom.contains("Finish selection"), "{bottom}");
        assert!(bottom.contains("Enter to select"), "{bottom}");
        assert!(!bottom.contains("Line one of the question."), "{bottom}");
    }

    fn key(app: &mut App, code: KeyCode) {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    }

    #[test]
    fn every_part_of_a_tall_dialog_is_reachable_with_markers() {
        for (w, h) in [(80, 24), (60, 20)] {
            let mut app = app_with(long_multiselect());
            let top = text(&app, w, h);
            assert!(top.contains(" Big "), "{top}");
            assert!(
                top.contains("▼ ") && top.contains("more lines below"),
                "{w}×{h}\n{top}"
            );
            assert!(!top.contains("▲"), "{top}");
            // End shows the bottom: All of the above, Other, Done, with a marker above.
            key(&mut app, KeyCode::End);
            let bottom = text(&app, w, h);
            for part in [
                "All of the above",
                "Enter a custom value",
                "Done",
                "Finish selection",
            ] {
                assert!(bottom.contains(part), "{part} at {w}×{h}\n{bottom}");
            }
            assert!(bottom.contains("▲ ") && !bottom.contains("▼"), "{bottom}");
            // Home (and PgUp from there) brings the header back; PgDn pages down.
            key(&mut app, KeyCode::Home);
            assert!(text(&app, w, h).contains(" Big "));
            key(&mut app, KeyCode::PageDown);
            let mid = text(&app, w, h);
            assert!(mid.contains("▲ "), "{mid}");
            key(&mut app, KeyCode::PageUp);
            assert!(text(&app, w, h).contains("Line one of the question."));
            // Every line was on screen at some scroll position: page through and collect.
            let mut seen = String::new();
            key(&mut app, KeyCode::Home);
            for _ in 0..12 {
                seen.push_str(&text(&app, w, h));
                key(&mut app, KeyCode::PageDown);
            }
            for part in [
                "Line two.",
                "Line three.",
                "First",
                "Second",
                "Third",
                "Fourth",
            ] {
                assert!(seen.contains(part), "{part} never shown at {w}×{h}");
            }
        }
    }

    #[test]
    fn up_on_the_first_row_scrolls_back_to_the_header_before_wrapping() {
        let mut app = app_with(long_multiselect());
        // Down to Done (the last row), then back to the first with Down (wrap).
        for _ in 0..6 {
            key(&mut app, KeyCode::Down);
        }
        assert!(text(&app, 60, 20).contains("●    Done"));
        key(&mut app, KeyCode::Down);
        let first = text(&app, 60, 20);
        assert!(first.contains("● 1. [ ] First"), "{first}");
        assert!(
            first.contains(" Big "),
            "the header comes back with the first row\n{first}"
        );
    }

    #[test]
    fn the_title_cuts_the_name_not_the_countdown() {
        let mut app = App::new();
        let now = Instant::now();
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        app.on_bus(
            BusUpdate::Event(UiEvent::Request(UiRequest {
                correlation_id: "c".into(),
                questions: json!([{"question": "Q?", "header": "H", "type": "yesno"}]),
                timeout_ms: 598_000,
                producer: ProducerInfo {
                    client: Some("a-very-long-agent-name/with-a-version-1.2.3".into()),
                    pid: Some(4242),
                    uid: 0,
                },
                context: None,
                node: None,
            })),
            now,
        );
        for w in [60, 40, 30] {
            let screen = text(&app, w, 12);
            let title = screen.lines().nth(1).unwrap();
            assert!(
                title.contains("9m 5") && title.contains("s left"),
                "{w}: {title}"
            );
            if w >= 40 {
                assert!(
                    title.contains("a-very") && title.contains("… asks"),
                    "{w}: {title}"
                );
            }
        }
    }

    #[test]
    fn notices_expire_and_reconnected_never_shows_under_disconnected() {
        let mut app = App::new();
        let now = Instant::now();
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        app.on_bus(
            BusUpdate::Down {
                error: "gone".into(),
                retry_in: Duration::from_secs(5),
            },
            now,
        );
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        assert!(text(&app, 80, 24).contains("Reconnected"));
        app.on_bus(
            BusUpdate::Down {
                error: "gone again".into(),
                retry_in: Duration::from_secs(5),
            },
            now,
        );
        let down = text(&app, 80, 24);
        assert!(down.contains("✗ disconnected"), "{down}");
        assert!(!down.contains("Reconnected"), "{down}");
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, &app, Instant::now() + Duration::from_secs(60), "/s"))
            .unwrap();
        let later: String = (0..80)
            .map(|x| t.backend().buffer()[(x, 23)].symbol().to_owned())
            .collect();
        assert!(
            !later.contains("Reconnected"),
            "a notice a minute old: {later}"
        );
    }

    #[test]
    fn small_terminals_degrade_without_panicking() {
        let app = app_with(long_multiselect());
        for (w, h) in [(40, 12), (20, 5), (20, 3), (10, 2), (1, 1)] {
            let _ = text(&app, w, h);
        }
        assert!(text(&app, 10, 2).contains("askbus ui"));
        assert!(text(&app_with(json!([])), 80, 24).contains("(no questions)"));
        let narrow = text(&app, 40, 12);
        assert!(narrow.contains("First"), "{narrow}");
    }

    #[test]
    fn wrap_breaks_at_spaces_and_keeps_newlines() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("a\nb", 10), vec!["a", "b"]);
        assert_eq!(wrap("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(wrap("", 3), vec![""]);
        assert_eq!(wrap("日本語 です", 6), vec!["日本語", "です"]);
    }

    #[test]
    fn escapes_in_bus_text_never_reach_a_cell() {
        let evil = "\x1b]52;c;cHduZWQ=\x07\x1b]0;title\x07\x1b[2J\u{9b}2J\u{202E}rlo";
        let mut app = App::new();
        let now = Instant::now();
        app.on_bus(BusUpdate::Connected { pending: 0 }, now);
        app.on_bus(
            BusUpdate::Event(UiEvent::Request(UiRequest {
                correlation_id: format!("id{evil}"),
                questions: json!([
                    {"question": format!("Q {evil}\nline2"), "header": format!("H{evil}"),
                     "type": "choice", "placeholder": format!("P{evil}"),
                     "options": [{"label": format!("L{evil}"), "description": format!("D{evil}")},
                                 {"label": "ok", "description": ""}]},
                    {"question": "t", "header": "T", "type": "text", "placeholder": format!("P{evil}")}
                ]),
                timeout_ms: 90_000,
                producer: ProducerInfo {
                    client: Some(format!("agent{evil}")),
                    pid: Some(1),
                    uid: 0,
                },
                context: Some(Box::new(askbusd::protocol::RequestContext {
                    agent: Some(format!("ag{evil}")),
                    project: Some(format!("pr{evil}")),
                    title: Some(format!("ti{evil}")),
                    ..Default::default()
                })),
                node: None,
            })),
            now,
        );
        // A lone request opens at once.
        let dialog = text(&app, 100, 30);
        app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        let second = text(&app, 100, 30);
        app.on_key(KeyEvent::new(KeyCode::Char('l'), KeyModifiers::CONTROL));
        let list = text(&app, 100, 30);
        for screen in [&list, &dialog, &second] {
            // (`text` joins the rows with newlines; the rows themselves hold none.)
            for row in screen.split('\n') {
                assert!(!row.contains(crate::term::is_unsafe), "{row:?}");
            }
        }
        // Visibly replaced, not dropped.
        assert!(list.contains("agent␛]52;c;cHduZWQ=␇"), "{list}");
        assert!(
            dialog.contains("Q ␛]52;c;cHduZWQ=␇␛]0;title␇␛[2J\u{FFFD}2J\u{FFFD}rlo"),
            "{dialog}"
        );
        assert!(dialog.contains("L␛]52"), "{dialog}");
        assert!(dialog.contains("D␛]52"), "{dialog}");
        assert!(second.contains("P␛]52"), "{second}");
    }

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("hello world", 6), "hello…");
    }
}
