//! How a card looks: its [`View`] (blocks and rows of buttons) for its kind and phase, the
//! redacted one (who, nothing of what), and code cut to what a message holds.

use super::*;

impl Card {
    /// What `--redact` shows: who, nothing of what.
    pub fn redacted(&self) -> View<Action> {
        let who = match &self.meta.project {
            Some(p) => format!("An agent in project {} needs you", clean(p, 80)),
            None => "An agent needs you".to_owned(),
        };
        let mut blocks = vec![Block::Title(who)];
        match &self.phase {
            Phase::Open => blocks.push(Block::Meta(left_in_words(self.meta.shown_left()))),
            Phase::Sending { .. } => {}
            Phase::Over(o) => blocks.push(Block::Note(redact_outcome(o))),
        }
        let rows = match (&self.open_url, self.is_open()) {
            (Some(url), true) => vec![vec![Button::Link {
                label: "Open in askbus web".into(),
                url: url.clone(),
            }]],
            _ => Vec::new(),
        };
        View { blocks, rows }
    }

    /// The message as it stands.
    pub fn view(&self) -> View<Action> {
        let mut blocks = vec![
            Block::Title(clean(&self.meta.title, MAX_TITLE)),
            Block::Meta(self.meta.line()),
        ];
        if self.meta.title.is_empty() {
            blocks.remove(0);
        }
        let mut rows = Vec::new();
        match &self.body {
            Body::Questions(q) => self.question_view(q, &mut blocks, &mut rows),
            Body::Approval(a) => self.approval_view(a, &mut blocks, &mut rows),
        }
        match &self.phase {
            Phase::Open => {}
            Phase::Sending { by, what } => {
                rows.clear();
                blocks.push(Block::Note(format!(
                    "Sending {} from {}…",
                    clean(what, MAX_ECHO),
                    clean(by, 120)
                )));
            }
            Phase::Over(outcome) => {
                rows.clear();
                blocks.push(Block::Note(outcome.clone()));
            }
        }
        if let (Some(url), true) = (&self.open_url, self.is_open()) {
            rows.push(vec![Button::Link {
                label: "Open in askbus web".into(),
                url: url.clone(),
            }]);
        }
        View { blocks, rows }
    }

    pub(super) fn question_view(
        &self,
        q: &Questions,
        blocks: &mut Vec<Block>,
        rows: &mut Vec<Vec<Button<Action>>>,
    ) {
        let n = q.qs.len();
        if n > 1 {
            for (i, a) in q.answers.iter().enumerate().take(q.step) {
                let header = &q.qs[i].header;
                blocks.push(Block::Note(format!(
                    "{}. {}: {}",
                    i + 1,
                    clean(header, 60),
                    a.as_deref().map_or("(no answer)".into(), |a| clean(a, 120))
                )));
            }
        }
        let Some(cur) = q.qs.get(q.step) else {
            // Every question answered: submit or start over.
            if self.is_open() {
                rows.push(vec![
                    tap("Submit", Action::Submit),
                    tap("Start over", Action::Restart),
                ]);
            }
            return;
        };
        if n > 1 {
            blocks.push(Block::Note(format!("Question {} of {n}", q.step + 1)));
            if q.step > 0 && !cur.header.is_empty() {
                blocks.push(Block::Title(clean(&cur.header, MAX_TITLE)));
            }
        }
        blocks.push(Block::Text(clean(&cur.text, MAX_TEXT)));
        if !self.is_open() {
            return;
        }
        match &cur.kind {
            QKind::Text => {
                blocks.push(Block::Note("Tap ✏️ Answer to type your answer.".to_owned()));
                rows.push(vec![tap("✏️ Answer", Action::Write)]);
            }
            QKind::Choice {
                options,
                multi: false,
                yesno,
            } => {
                for (i, o) in options.iter().enumerate() {
                    if !o.description.is_empty() {
                        blocks.push(Block::Note(format!(
                            "{}: {}",
                            clean(&o.label, 60),
                            clean(&o.description, 200)
                        )));
                    }
                    rows.push(vec![tap(&o.label, Action::Pick(i as u8))]);
                }
                if *yesno {
                    // Yes and No side by side.
                    let both: Vec<_> = rows.drain(..).flatten().collect();
                    rows.push(both);
                } else {
                    rows.push(vec![tap("✏️ Other…", Action::Write)]);
                }
            }
            QKind::Choice {
                options,
                multi: true,
                ..
            } => {
                let checked = &q.checked[q.step];
                for (i, o) in options.iter().enumerate() {
                    if !o.description.is_empty() {
                        blocks.push(Block::Note(format!(
                            "{}: {}",
                            clean(&o.label, 60),
                            clean(&o.description, 200)
                        )));
                    }
                    let mark = if checked.get(i) == Some(&true) {
                        "☑"
                    } else {
                        "☐"
                    };
                    rows.push(vec![tap(
                        &format!("{mark} {}", o.label),
                        Action::Toggle(i as u8),
                    )]);
                }
                let mut last = Vec::new();
                if options.len() > 1 {
                    last.push(tap("All of the above", Action::All));
                }
                last.push(tap("✏️ Other…", Action::Write));
                last.push(tap("Done", Action::Done));
                rows.push(last);
            }
        }
    }

    pub(super) fn approval_view(
        &self,
        a: &Approval,
        blocks: &mut Vec<Block>,
        rows: &mut Vec<Vec<Button<Action>>>,
    ) {
        if let Some(t) = &a.text {
            blocks.push(Block::Text(clean(t, MAX_TEXT)));
        }
        if let Some(c) = &a.code {
            blocks.push(Block::Code(clean_code(c)));
            if a.cut > 0 {
                let more = match &self.open_url {
                    Some(_) => " (the whole of it in askbus web)",
                    None => "",
                };
                blocks.push(Block::Note(format!("… {} more lines{more}", a.cut)));
            }
        }
        if !self.is_open() {
            return;
        }
        if a.denying {
            blocks.push(Block::Note(
                "Give the agent a reason in the prompt, or deny without one.".into(),
            ));
            rows.push(vec![
                tap("Deny without a reason", Action::DenyNow),
                tap("Back", Action::Back),
            ]);
            return;
        }
        // What each "always" writes, before the tap (the rule the tap then writes), and what
        // its widened twin writes when the rule names the request's project.
        for o in &a.always {
            blocks.push(Block::Note(clean(
                &format!("{}: {}", o.chosen.label(), o.says(false)),
                MAX_TEXT,
            )));
            if o.widens() {
                blocks.push(Block::Note(clean(
                    &format!("{}: {}", everywhere_label(o), o.says(true)),
                    MAX_TEXT,
                )));
            }
        }
        let mut allow_row = Vec::new();
        for o in &a.allow {
            let i = ToolOutcome::ALL.iter().position(|x| x == o).unwrap_or(0) as u8;
            allow_row.push(tap(o.label(), Action::Allow(i)));
            if let Some(w) = a.always.iter().find(|x| x.chosen == *o && x.widens()) {
                allow_row.push(tap(&everywhere_label(w), Action::AllowEverywhere(i)));
            }
        }
        // Two per row ("Allow this tool always" and its like are long), three when there are
        // many (every "always" of Gemini CLI's and their widened twins): with Deny's row that
        // stays within Discord's five rows of buttons.
        let per_row = if allow_row.len() > 6 { 3 } else { 2 };
        for pair in allow_row.chunks(per_row) {
            rows.push(pair.to_vec());
        }
        rows.push(vec![tap("Deny", Action::Deny)]);
    }
}

impl Question {
    pub(super) fn labels_owned(&self) -> Vec<String> {
        self.labels().into_iter().map(str::to_owned).collect()
    }
}

pub(super) fn tap(label: &str, action: Action) -> Button<Action> {
    Button::Tap {
        label: clean(label, MAX_LABEL),
        action,
    }
}

/// An outcome line without the answer (for `--redact`).
pub(super) fn redact_outcome(o: &str) -> String {
    o.split(':').next().unwrap_or(o).to_owned()
}

/// A code block cut with care: whole lines, at most [`MAX_CODE_LINES`] and [`MAX_CODE`]
/// characters (a single overlong line is cut on a character boundary); how many lines were cut.
pub(super) fn cut_code(code: &str) -> (String, usize) {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = String::new();
    let mut kept = 0;
    for line in &lines {
        let add = line.chars().count() + usize::from(kept > 0);
        if kept >= MAX_CODE_LINES || out.chars().count() + add > MAX_CODE {
            if kept == 0 {
                out = line.chars().take(MAX_CODE - 1).collect();
                out.push('…');
                kept = 1;
            }
            break;
        }
        if kept > 0 {
            out.push('\n');
        }
        out.push_str(line);
        kept += 1;
    }
    (out, lines.len().saturating_sub(kept))
}

/// A code block's lines neutralised one by one (newlines are the block's own).
pub(super) fn clean_code(code: &str) -> String {
    code.split('\n')
        .map(|l| clean(l, MAX_CODE))
        .collect::<Vec<_>>()
        .join("\n")
}
