//! The waiting list: every pending request, grouped by project (groups in the order their
//! first request came), with who asks, how long is left, what it is about and its first line.

use std::time::Instant;

use ratatui::layout::Rect;
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use askbus::protocol::UiApproval;
use serde_json::Value;

use super::super::app::{App, Ask, Conn};
use super::super::scroll::Scroll;
use super::{body_and_footer, fit, time_left, truncate, wrap, ACCENT, BAD, DIM, WARN};

pub(super) fn list(frame: &mut Frame, app: &App, now: Instant, area: Rect, socket: &str) {
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(DIM))
        .title({
            let what = if app.entries.iter().any(|e| e.is_approval()) {
                "Pending questions and approvals"
            } else {
                "Pending questions"
            };
            if app.filter.is_empty() {
                format!(" {what} ")
            } else {
                format!(" {what} · {} ", app.filter)
            }
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
        // Who asks gives way to the countdown when the line is narrow, never the reverse.
        let number = format!("{}. ", i + 1);
        let left = format!(" · {}", time_left(e, now));
        let stale = if e.stale { " (reconnecting…)" } else { "" };
        let room = width.saturating_sub(marker.width() + number.width() + left.width());
        // (The status bar says offline too: a narrow line leaves the reminder out.)
        let stale = if room >= stale.width() + 12 {
            stale
        } else {
            ""
        };
        let who = truncate(&e.who(), room.saturating_sub(stale.width()).max(4));
        let mut first = vec![
            Span::styled(marker, Style::new().fg(ACCENT)),
            Span::styled(format!("{number}{who}"), style),
            Span::styled(left, Style::new().fg(DIM)),
        ];
        if !stale.is_empty() {
            first.push(Span::styled(stale, Style::new().fg(WARN)));
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
        let (body, more) = match &e.ask {
            Ask::Question { dialog, .. } => {
                let qs = &dialog.questions;
                let more = match qs.len() {
                    0 | 1 => String::new(),
                    n => format!("  (+{} more)", n - 1),
                };
                let body = qs.first().map(|q| {
                    let text = q.text.lines().next().unwrap_or("");
                    format!("{} {text}", chip_text(&q.header))
                });
                (body, more)
            }
            Ask::Approval { request, .. } => (Some(approval_summary(request)), String::new()),
        };
        if let Some(body) = body {
            let style = if e.is_approval() {
                Style::new().fg(WARN)
            } else {
                Style::new().fg(DIM)
            };
            lines.push(Line::from(vec![
                Span::raw("     "),
                Span::styled(
                    truncate(&body, width.saturating_sub(5 + more.width())),
                    style,
                ),
                Span::styled(more, Style::new().fg(DIM)),
            ]));
        }
        if here {
            focus.1 = lines.len();
        }
    }
    let hints = if app.entries.is_empty() {
        "q to quit · h history"
    } else {
        "Enter to open · ↑/↓ to navigate · q to quit · h history"
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

pub(super) fn chip_text(header: &str) -> String {
    if header.is_empty() {
        String::new()
    } else {
        format!("[{header}]")
    }
}

/// One line saying what an approval would do: "⚑ Approval: $ rm -rf build", "⚑ Approval:
/// edit src/main.rs", "⚑ Approval: github › create_issue".
pub(super) fn approval_summary(a: &UiApproval) -> String {
    let d = a.details.as_ref();
    let s = |k: &str| {
        d.and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let tool = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let what = match s("type") {
        "exec" | "sandbox_expansion" => format!("$ {}", s("command").lines().next().unwrap_or("")),
        "edit" => format!("edit {}", s("fileName")),
        "mcp" => format!("{} › {}", s("serverName"), s("toolName")),
        "info" => s("prompt").lines().next().unwrap_or("").to_owned(),
        "exit_plan_mode" => format!("plan {}", s("planPath")),
        _ if !s("title").is_empty() => s("title").to_owned(),
        _ => tool.to_owned(),
    };
    format!("⚑ Approval: {what}")
}
