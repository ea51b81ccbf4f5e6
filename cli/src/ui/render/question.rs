//! A question's dialog: the title (who asks, the countdown), the context line, the tabs of
//! several questions, one question's choices or text field, and the review, as Gemini CLI's
//! AskUserDialog lays them out.

use std::time::Instant;

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::super::app::Entry;
use super::super::dialog::{Dialog, Kind, Row, Widget};
use super::super::encode::Pick;
use super::{body_and_footer, fit, time_left, truncate, wrap, Body, ACCENT, DIM, GOOD, WARN};
use crate::term::{self, sanitize};

pub(super) fn dialog(frame: &mut Frame, entry: &Entry, d: &Dialog, now: Instant, area: Rect) {
    let block = block(entry, now, area, "asks");
    let width = area.width.saturating_sub(4) as usize;
    let mut body = Body::default();
    about(entry, width, &mut body);
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

/// The dialog's box: who asks (cut first when narrow) and the countdown (kept whole), and
/// "offline" below while the connection is down.
pub(super) fn block(entry: &Entry, now: Instant, area: Rect, verb: &str) -> Block<'static> {
    // The countdown keeps its room; the name gives way (cut with "…"), then the verb.
    let left = format!(" {} ", time_left(entry, now));
    let verb = format!(" {verb} ");
    let room = (area.width as usize)
        .saturating_sub(2 + left.width() + 1)
        .saturating_sub(verb.width() + 1);
    let who = term::sanitize(&entry.who()).into_owned();
    let title = if room >= 4 {
        vec![
            Span::raw(" "),
            Span::styled(truncate(&who, room), Style::new().bold()),
            Span::raw(verb),
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
        let text = " offline: answers wait for the reconnect ";
        let text = if text.width() + 4 <= area.width as usize {
            text
        } else {
            " offline "
        };
        block = block.title_bottom(Line::styled(text, Style::new().fg(WARN)));
    }
    block
}

/// Who is asking, about what: project, agent and title, above the request.
pub(super) fn about(entry: &Entry, width: usize, body: &mut Body) {
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
}

/// Whether the dialog's focus is its first row (or it has none): then the view keeps the top
/// (tabs, header, question) on screen whenever the focus fits with it.
fn prefer_top(d: &Dialog) -> bool {
    match d.cursor_edges() {
        None => true,
        Some((first, _)) => first,
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
