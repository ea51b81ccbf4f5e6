//! The recent history in `askbus ui` (`h` in the list): the latest records askbusd keeps of
//! what was asked and how it ended (the daemon's `history` frame, newest first, isolated by
//! uid there), and one record's whole timeline (Enter). The state and its keys; the records
//! are fetched by the loop (`mod.rs`), drawn by `render::history`.

use askbus::history::HistoryRecord;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Records the view asks for.
pub const RECENT: u32 = 50;

#[derive(Debug, Default)]
pub struct History {
    pub records: Vec<HistoryRecord>,
    pub cursor: usize,
    /// The record under the cursor is open, whole.
    pub detail: bool,
    /// Why there are no records to show (loading, an error), if so.
    pub status: Option<String>,
}

/// What a key in the history view asks of the app.
#[derive(Debug, PartialEq, Eq)]
pub enum Key {
    Stay,
    Close,
    Reload,
}

impl History {
    pub fn loading() -> History {
        History {
            status: Some("Loading the history…".into()),
            ..History::default()
        }
    }

    /// The records came (or why not).
    pub fn loaded(&mut self, result: Result<Vec<HistoryRecord>, String>) {
        match result {
            Ok(records) => {
                self.status = records
                    .is_empty()
                    .then(|| "No records yet (or askbusd keeps no store).".into());
                self.records = records;
                self.cursor = self.cursor.min(self.records.len().saturating_sub(1));
            }
            Err(e) => {
                self.records.clear();
                self.status = Some(format!("The history could not be read: {e}"));
            }
        }
        self.detail = false;
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Key {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let n = self.records.len();
        match key.code {
            KeyCode::Esc | KeyCode::Left | KeyCode::Char('h') if self.detail => self.detail = false,
            KeyCode::Esc | KeyCode::Char('h') | KeyCode::Char('q') => return Key::Close,
            KeyCode::Char('c') if ctrl => return Key::Close,
            KeyCode::Char('r') if !ctrl => return Key::Reload,
            KeyCode::Up | KeyCode::Char('k') if n > 0 => self.cursor = (self.cursor + n - 1) % n,
            KeyCode::Down | KeyCode::Char('j') if n > 0 => self.cursor = (self.cursor + 1) % n,
            KeyCode::Enter | KeyCode::Right | KeyCode::Char(' ') if n > 0 => self.detail = true,
            _ => {}
        }
        Key::Stay
    }

    pub fn current(&self) -> Option<&HistoryRecord> {
        self.records.get(self.cursor)
    }
}

/// Who decided: `human/tui`, `rule`, `timeout`…
pub fn decided_by(r: &HistoryRecord) -> String {
    let Some(d) = &r.decided_by else {
        return String::new();
    };
    let kind = d["kind"].as_str().unwrap_or("");
    match d["via"].as_str() {
        Some(via) => format!("{kind}/{via}"),
        None => kind.to_owned(),
    }
}

/// What was asked, in one line.
pub fn what(r: &HistoryRecord) -> String {
    if r.kind == "approval" {
        let call = r.tool_call.as_ref();
        let tool = call.and_then(|t| t["name"].as_str()).unwrap_or("a tool");
        return match call.and_then(|t| t["args"]["command"].as_str()) {
            Some(c) => format!("{tool}: {c}"),
            None => tool.to_owned(),
        };
    }
    r.questions
        .as_ref()
        .and_then(|q| q[0]["question"].as_str())
        .unwrap_or("(redacted)")
        .to_owned()
}

/// The answer or decision, in one line.
pub fn outcome(r: &HistoryRecord) -> String {
    if let Some(d) = &r.decision {
        return d["outcome"].as_str().unwrap_or("").to_owned();
    }
    match r.answers.as_ref().and_then(|a| a.as_object()) {
        Some(a) => a
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(" · "),
        None => String::new(),
    }
}

/// A record's timeline and facts, as `(label, text)` rows.
pub fn timeline(r: &HistoryRecord) -> Vec<(&'static str, String)> {
    let ctx = |k: &str| {
        r.context
            .as_ref()
            .and_then(|c| c[k].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let mut rows = vec![
        ("id", r.correlation_id.clone()),
        ("kind", r.kind.clone()),
        ("project", ctx("project")),
        ("agent", ctx("agent")),
        (
            "asked",
            format!(
                "{} by {} (uid {}, pid {}){}",
                r.asked_at,
                r.producer.client.as_deref().unwrap_or("an agent"),
                r.producer.uid,
                r.producer.pid.map_or("-".into(), |p| p.to_string()),
                r.node
                    .as_deref()
                    .map(|n| format!(" on node {n}"))
                    .unwrap_or_default()
            ),
        ),
        ("what", what(r)),
    ];
    match &r.ended_at {
        Some(at) => {
            let by = decided_by(r);
            rows.push((
                "ended",
                format!(
                    "{at} {}{}",
                    r.reason,
                    if by.is_empty() {
                        String::new()
                    } else {
                        format!(" by {by}")
                    }
                ),
            ));
            let o = outcome(r);
            if !o.is_empty() {
                rows.push(("answer", o));
            }
            rows.push(("delivered", if r.delivered { "yes" } else { "no" }.into()));
        }
        None => rows.push(("pending", format!("times out at {}", r.deadline))),
    }
    rows.push(("shown", r.shown_sha256.clone()));
    rows.retain(|(_, v)| !v.is_empty());
    rows
}
