//! An approval's dialog: what the tool call would do (see [`super::details`]) in a region that
//! scrolls on its own, and below it the buttons (Allow once, Allow always where the agent
//! offers it, Deny with the reason for the agent), which never scroll away: a long diff is read
//! with PgUp/PgDn while the decision stays one key away.

use std::time::Instant;

use askbus::protocol::{ToolOutcome, UiApproval};
use ratatui::layout::Rect;
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

use super::super::app::Entry;
use super::super::approval::{Decision, REASON_HINT};
use super::question::{about, block};
use super::{details, footer, scrolled, truncate, Body, ACCENT, BAD, DIM, GOOD, WARN};

/// Rows the reason field may take under Deny.
const REASON_ROWS: usize = 3;
/// Rows the rule an "always" button writes may take under it.
const RULE_ROWS: usize = 4;

pub(super) fn dialog(
    frame: &mut Frame,
    entry: &Entry,
    a: &UiApproval,
    decision: &Decision,
    now: Instant,
    area: Rect,
) {
    let block = block(entry, now, area, "asks");
    let width = area.width.saturating_sub(4) as usize;
    // Laid out once per width: a diff can be tens of thousands of lines, and the screen is
    // redrawn on every key and tick.
    let mut cache = entry.layout.borrow_mut();
    if cache.as_ref().is_none_or(|(w, _)| *w != width) {
        let mut body = Body::default();
        about(entry, width, &mut body);
        // One screen holds little: no blank row between who asks and what.
        if body.lines.len() > 1 {
            body.lines.pop();
        }
        heading(a, width, &mut body);
        body.lines.extend(details::lines(a, width));
        *cache = Some((width, body.lines));
    }
    let lines = &cache.as_ref().expect("laid out above").1;

    let (buttons, cursor) = buttons(decision, width);
    // Box, then inside: details, a blank row, the buttons, a blank row, the hints.
    let want = lines.len() + 1 + buttons.len() + 2 + 2;
    let area = Rect {
        height: area.height.min(want.min(u16::MAX as usize) as u16),
        ..area
    };
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 || inner.width < 4 {
        return;
    }
    let text = Rect {
        x: inner.x + 1,
        width: inner.width - 2,
        ..inner
    };
    let h = inner.height as usize;
    // The buttons come first: on a very small screen the details give up their rows.
    let buttons_h = buttons.len().min(h.saturating_sub(1));
    let spare = h - buttons_h;
    let (gap, hint_gap) = if spare >= 6 { (1, 1) } else { (0, 0) };
    let hint_h = usize::from(spare >= 2);
    let details_h = spare - gap - hint_gap - hint_h;
    let details_rect = Rect {
        height: details_h as u16,
        ..text
    };
    let buttons_rect = Rect {
        y: text.y + (details_h + gap) as u16,
        height: buttons_h as u16,
        ..text
    };
    if details_h > 0 {
        scrolled(
            frame,
            details_rect,
            lines,
            (0, 1),
            true,
            &entry.scroll,
            None,
        );
    }
    // Rows that do not fit: those away from the cursor's button go (the focus stays in view).
    let focus = button_row(decision, width);
    let shown_from = focus
        .saturating_sub(buttons_h.saturating_sub(1))
        .min(buttons.len() - buttons_h);
    frame.render_widget(
        Paragraph::new(buttons.into_iter().skip(shown_from).collect::<Vec<_>>()),
        buttons_rect,
    );
    if let Some((row, col)) = cursor {
        if row >= shown_from {
            frame.set_cursor_position((
                buttons_rect.x + (col as u16).min(buttons_rect.width.saturating_sub(1)),
                buttons_rect.y + (row - shown_from) as u16,
            ));
        }
    }
    if hint_h > 0 {
        let hint_rect = Rect {
            y: inner.bottom() - 1,
            height: 1,
            ..text
        };
        footer(frame, hint_rect, &hints(decision, entry.scroll.hidden()));
    }
}

/// "⚑ Approval  Confirm Shell Command  run_shell_command", then the server and subagent
/// if any, and the agent's system message.
fn heading(a: &UiApproval, width: usize, body: &mut Body) {
    let title = a
        .details
        .as_ref()
        .and_then(|d| d.get("title"))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .unwrap_or("Allow this tool call?");
    let tool = a
        .tool_call
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let chip = " ⚑ Approval ";
    let room = width.saturating_sub(chip.width() + 1);
    let title = truncate(title, room);
    let tool = truncate(&format!("  {tool}"), room.saturating_sub(title.width()));
    body.push(Line::from(vec![
        Span::styled(
            chip,
            Style::new()
                .bg(WARN)
                .fg(ratatui::style::Color::Black)
                .bold(),
        ),
        Span::raw(" "),
        Span::styled(title, Style::new().bold()),
        Span::styled(
            if tool.width() > 3 {
                tool
            } else {
                String::new()
            },
            Style::new().fg(DIM),
        ),
    ]));
    let mut via = Vec::new();
    if let Some(server) = &a.server_name {
        via.push(format!("server {server}"));
    }
    if let Some(sub) = &a.subagent {
        via.push(format!("subagent {sub}"));
    }
    for l in super::wrap(&via.join(" · "), width)
        .into_iter()
        .filter(|l| !l.is_empty())
    {
        body.push(Line::styled(l, Style::new().fg(DIM)));
    }
    if let Some(msg) = a
        .details
        .as_ref()
        .and_then(|d| d.get("systemMessage"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        for l in super::wrap(msg, width) {
            body.push(Line::styled(l, Style::new().fg(WARN).italic()));
        }
    }
}

/// The button rows and, when the reason field has the focus, where the cursor goes in them.
fn buttons(d: &Decision, width: usize) -> (Vec<Line<'static>>, Option<(usize, usize)>) {
    let mut rows = Vec::new();
    let mut cursor = None;
    let num_w = d.buttons.len().to_string().len();
    for (i, outcome) in d.buttons.iter().enumerate() {
        let here = i == d.cursor;
        let color = if *outcome == ToolOutcome::Cancel {
            BAD
        } else {
            GOOD
        };
        let label_style = if here {
            Style::new().fg(color).bold()
        } else {
            Style::new()
        };
        let label = truncate(outcome.label(), width.saturating_sub(4 + num_w));
        let rest = width.saturating_sub(4 + num_w + label.width());
        let short = match d.offer(i) {
            Some(o) if !here && rest > 8 => truncate(&format!(" · {}", short_rule(o, d)), rest),
            _ => String::new(),
        };
        rows.push(Line::from(vec![
            Span::styled(if here { "● " } else { "  " }, Style::new().fg(ACCENT)),
            Span::styled(
                format!("{:>num_w$}. ", i + 1),
                Style::new().fg(if here { ACCENT } else { DIM }),
            ),
            Span::styled(label, label_style),
            Span::styled(short, Style::new().fg(DIM)),
        ]));
        let indent = 4 + num_w;
        for (k, l) in rule_lines(d, i, width).into_iter().enumerate() {
            rows.push(Line::from(vec![
                Span::raw(" ".repeat(indent)),
                Span::styled(if k == 0 { "↳ " } else { "  " }, Style::new().fg(DIM)),
                Span::styled(l, Style::new().fg(DIM)),
            ]));
        }
        if *outcome == ToolOutcome::Cancel {
            let indent = 4 + num_w;
            let lead = "↳ ";
            let room = width.saturating_sub(indent + lead.width()).max(2);
            if d.reason.is_empty() {
                if here {
                    cursor = Some((rows.len(), indent + lead.width()));
                }
                rows.push(Line::from(vec![
                    Span::raw(" ".repeat(indent)),
                    Span::styled(lead, Style::new().fg(DIM)),
                    Span::styled(truncate(REASON_HINT, room), Style::new().fg(DIM)),
                ]));
            } else {
                let (lines, (r, c)) = d.reason.layout(room);
                // The rows around the cursor, when the reason is longer than its room.
                let first = (r + 1).saturating_sub(REASON_ROWS);
                if here {
                    cursor = Some((rows.len() + r - first, indent + lead.width() + c));
                }
                for (k, l) in lines.into_iter().enumerate().skip(first).take(REASON_ROWS) {
                    rows.push(Line::from(vec![
                        Span::raw(" ".repeat(indent)),
                        Span::styled(if k == first { lead } else { "  " }, Style::new().fg(DIM)),
                        Span::raw(l),
                    ]));
                }
            }
        }
    }
    (rows, cursor)
}

/// The rows under an "always" button `i` saying the rule it writes, before the tap (the
/// person may press its number without moving to it): the whole rule with its file under
/// the button the cursor is on (the others say it in short on their own row, [`short_rule`]).
fn rule_lines(d: &Decision, i: usize, width: usize) -> Vec<String> {
    let Some(offer) = d.offer(i) else {
        return Vec::new();
    };
    let room = width
        .saturating_sub(4 + d.buttons.len().to_string().len() + "↳ ".width())
        .max(2);
    if i != d.cursor {
        return Vec::new();
    }
    let lines = super::wrap(&offer.says(d.any_project), room);
    let n = lines.len();
    lines
        .into_iter()
        .take(RULE_ROWS)
        .enumerate()
        .map(|(k, l)| {
            if k + 1 == RULE_ROWS && n > RULE_ROWS {
                truncate(&format!("{l} …"), room)
            } else {
                l
            }
        })
        .collect()
}

/// An "always" button's rule in short, beside it.
fn short_rule(o: &crate::always::Offer, d: &Decision) -> String {
    match o.rule(d.any_project) {
        Some(r) => format!("rule: allow {}", r.summary),
        None => "no askbus rule".to_owned(),
    }
}

/// The row of the button under the cursor (rule rows follow an "always" button, the reason
/// rows Deny, the last button).
fn button_row(d: &Decision, width: usize) -> usize {
    d.cursor
        + (0..d.cursor)
            .map(|i| rule_lines(d, i, width).len())
            .sum::<usize>()
}

fn hints(d: &Decision, scrolls: bool) -> String {
    let mut parts = vec![if d.is_editing() {
        "Enter to deny"
    } else {
        "Enter to choose"
    }];
    parts.push("↑/↓ to move");
    if scrolls {
        parts.push("PgUp/PgDn to scroll");
    }
    parts.push("Esc to dismiss");
    if d.widens() && !d.is_editing() {
        parts.push(if d.any_project {
            "^W this project"
        } else {
            "^W every project"
        });
    }

    parts.join(" · ")
}
