//! The UI's state: the pending requests (oldest first) with a dialog each, which one is in
//! view, the connection's state, and the notice. It turns what the subscription reports
//! (connected, an event, down) and keys into state changes and into the frames to send; it
//! does no I/O and no drawing.
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use askbus::client::UiEvent;
use askbus::protocol::{
    ErrorCode, ErrorFrame, Outcome as AckOutcome, ToolOutcome, UiApproval, UiRequest,
    WithdrawReason,
};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::approval::{self, Decision};
use super::dialog::{Dialog, Outcome};
pub use super::entry::{Action, Ask, Conn, Entry, Tone, View};
use super::entry::{Notice, NOTICE_FOR};
use super::history::{self as recent, History};
use super::scroll::Move;

/// Drafts kept for requests a replay did not bring back (they may still come, restored).
const MAX_DRAFTS: usize = 64;

pub struct App {
    pub entries: Vec<Entry>,
    /// The recent history (`h` in the list), when open: drawn over everything else.
    pub history: Option<History>,
    /// What this UI's subscribe filter shows ("" for everything), for the list's title.
    pub filter: String,
    pub view: View,
    pub list_cursor: usize,
    pub conn: Conn,
    pub notice: Option<Notice>,
    /// Requests the current subscription's replay has still to deliver, and those it did.
    replay: Option<(u64, HashSet<String>)>,
    /// The requests this UI answered and awaits an ack for, kept aside: one whose answer the
    /// daemon refuses while the request stays pending (its origin node unreachable, say) comes
    /// back on screen as the person left it, to try again.
    sent: HashMap<String, Entry>,
    /// Bytes that came on standard input (a pipe), kept to print on quitting.
    pub piped: Option<usize>,
    /// Drafts: requests that left the screen across a reconnect without being answered (an
    /// answer in flight when the daemon went down, a request the replay did not bring back
    /// yet), kept by correlationId as the person left them, so a daemon restart that restores
    /// the request (with a store) brings back what was typed, once. Never shown by themselves.
    drafts: HashMap<String, Entry>,
    /// The "always" rules written for decisions awaiting their ack (what each allows), so
    /// the ack's notice says the rule is in force.
    rules: HashMap<String, String>,
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl App {
    pub fn new() -> App {
        App {
            entries: Vec::new(),
            history: None,
            filter: String::new(),
            view: View::List,
            list_cursor: 0,
            conn: Conn::Connecting,
            notice: None,
            replay: None,
            sent: HashMap::new(),
            piped: None,
            rules: HashMap::new(),
            drafts: HashMap::new(),
        }
    }

    pub fn open_entry(&self) -> Option<&Entry> {
        match &self.view {
            View::Dialog(id) => self.entries.iter().find(|e| e.id() == id),
            View::List => None,
        }
    }

    fn open_entry_mut(&mut self) -> Option<&mut Entry> {
        match &self.view {
            View::Dialog(id) => self.entries.iter_mut().find(|e| e.id() == id),
            View::List => None,
        }
    }

    fn notice(&mut self, tone: Tone, text: impl Into<String>) {
        self.notice = Some(Notice {
            text: text.into(),
            tone,
            until: Instant::now() + NOTICE_FOR,
        });
    }

    /// Subscribed (again): `pending` requests are about to be replayed.
    pub fn on_connected(&mut self, pending: u64) {
        let reconnected = matches!(self.conn, Conn::Down { .. });
        self.conn = Conn::Connected;
        self.replay = Some((pending, HashSet::new()));
        if reconnected {
            self.notice(Tone::Good, "Reconnected to askbusd");
        }
        if pending == 0 {
            self.finish_replay();
        }
    }

    /// The connection is gone (or could not be made); the next attempt is in `retry_in`.
    pub fn on_down(&mut self, error: String, retry_in: Duration, now: Instant) {
        if !matches!(self.conn, Conn::Down { .. }) {
            for e in &mut self.entries {
                e.stale = true;
            }
            // The status bar now says disconnected; good news of the old connection
            // ("Reconnected", "Sending…") would contradict it. Warnings stay (why a
            // dialog just closed, say).
            if self
                .notice
                .as_ref()
                .is_some_and(|n| matches!(n.tone, Tone::Good | Tone::Info))
            {
                self.notice = None;
            }
        }
        self.replay = None;
        // Acks and errors come on the connection the answer went on: none will come now.
        // What is still pending comes back with the next subscription's replay, and finds
        // what was typed into it in the drafts.
        for (id, entry) in self.sent.drain() {
            self.drafts.insert(id, entry);
        }
        self.rules.clear();
        self.conn = Conn::Down {
            error,
            retry_at: now + retry_in,
        };
    }

    /// What the daemon sent this UI.
    pub fn on_event(&mut self, event: UiEvent, now: Instant) {
        match event {
            UiEvent::Request(r) => self.on_request(r, now),
            UiEvent::Withdrawn {
                correlation_id,
                reason,
            } => self.on_withdrawn(&correlation_id, reason),
            UiEvent::Ack {
                correlation_id,
                outcome,
            } => {
                let whom = self.sent_to(&correlation_id);
                match outcome {
                    AckOutcome::Dismissed => {
                        self.notice(Tone::Info, format!("Dismissed; {whom} was told"))
                    }
                    _ => self.notice(Tone::Good, format!("✓ Answer delivered to {whom}")),
                }
            }
            UiEvent::Error(e) => self.on_error(e),
            UiEvent::Approval(a) => self.on_approval(a, now),
            UiEvent::ApprovalWithdrawn {
                correlation_id,
                reason,
            } => self.on_withdrawn(&correlation_id, reason),
            UiEvent::ApprovalAck(ack) => {
                let whom = self.sent_to(&ack.correlation_id);
                let rule = self
                    .rules
                    .remove(&ack.correlation_id)
                    .map(|r| format!(" · rule written: allow {r}"))
                    .unwrap_or_default();
                match (ack.reason, ack.outcome) {
                    (AckOutcome::Dismissed, _) => self.notice(
                        Tone::Info,
                        format!("Dismissed without deciding; {whom} was told (not approved)"),
                    ),
                    (_, ToolOutcome::Cancel) => {
                        self.notice(Tone::Info, format!("✗ Denied; {whom} was told"))
                    }
                    (_, o) => self.notice(
                        Tone::Good,
                        format!("✓ {} · delivered to {whom}{rule}", o.label()),
                    ),
                }
            }
        }
    }

    fn on_approval(&mut self, a: Box<UiApproval>, now: Instant) {
        let id = a.correlation_id.clone();
        if let Some(e) = self.entries.iter_mut().find(|e| e.id() == id) {
            // The same approval again after a reconnect: keep the reason typed into it.
            if let Ask::Approval { request, decision } = &mut e.ask {
                if request.outcomes != a.outcomes {
                    *decision = Decision::for_approval(&a);
                }
                e.deadline = now + Duration::from_millis(a.timeout_ms);
                *request = a;
                e.layout.take();
                e.stale = false;
                self.arrived(&id);
                return;
            }
        }
        let entry = Entry::approval_from(self.drafts.remove(&id), a, now);
        self.insert(entry);
        self.arrived(&id);
    }

    fn on_request(&mut self, r: UiRequest, now: Instant) {
        let id = r.correlation_id.clone();
        if let Some(e) = self.entries.iter_mut().find(|e| e.id() == id) {
            // The same request again after a reconnect: keep what was typed into it.
            if let Ask::Question { request, dialog } = &mut e.ask {
                if request.questions != r.questions {
                    *dialog = Dialog::from_json(&r.questions);
                }
                e.deadline = now + Duration::from_millis(r.timeout_ms);
                *request = r;
                e.stale = false;
                self.arrived(&id);
                return;
            }
        }
        let entry = Entry::question_from(self.drafts.remove(&id), r, now);
        self.insert(entry);
        self.arrived(&id);
    }

    /// A new request: grouped by project, after the last one of its project (groups in the
    /// order their first request came), so the list shows each project's requests together.
    /// The first to arrive on an idle screen opens.
    fn insert(&mut self, entry: Entry) {
        let was_idle = self.entries.is_empty() && self.view == View::List;
        let id = entry.id().to_owned();
        let at = self
            .entries
            .iter()
            .rposition(|e| e.project() == entry.project())
            .map_or(self.entries.len(), |i| i + 1);
        if at <= self.list_cursor && at < self.entries.len() {
            // Keep the cursor on the request it was on.
            self.list_cursor += 1;
        }
        self.entries.insert(at, entry);
        if was_idle {
            self.view = View::Dialog(id);
        }
    }

    /// Counts a request (new or replayed) against the replay in progress.
    fn arrived(&mut self, id: &str) {
        if let Some((remaining, seen)) = &mut self.replay {
            *remaining = remaining.saturating_sub(1);
            seen.insert(id.to_owned());
        }
        if matches!(&self.replay, Some((0, _))) {
            self.finish_replay();
        }
    }

    /// The replay is complete: what it did not bring back is gone from the daemon.
    fn finish_replay(&mut self) {
        let Some((_, seen)) = self.replay.take() else {
            return;
        };
        let open = self.open_entry().map(|e| e.id().to_owned());
        let mut gone = Vec::new();
        let (kept, left): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|e| !e.stale || seen.contains(e.id()));
        self.entries = kept;
        for e in left {
            gone.push((e.id().to_owned(), e.who(), e.noun()));
            // A restored request may still come (live, after the replay): its draft waits.
            self.drafts.insert(e.id().to_owned(), e);
        }
        // Drafts the replay did bring back are on screen; the rest wait, a bounded few.
        self.drafts.retain(|id, _| !seen.contains(id));
        while self.drafts.len() > MAX_DRAFTS {
            let Some(id) = self.drafts.keys().next().cloned() else {
                break;
            };
            self.drafts.remove(&id);
        }
        if let Some((_, whom, noun)) = gone.iter().find(|(id, ..)| Some(id) == open.as_ref()) {
            self.notice(
                Tone::Warn,
                format!(
                    "{} from {whom} closed: askbusd no longer has it (restarted?)",
                    capitalized(noun)
                ),
            );
            self.after_close();
        } else if !gone.is_empty() {
            let n = gone.len();
            let noun = if gone.iter().all(|(_, _, noun)| *noun == "question") {
                "question"
            } else {
                "request"
            };
            self.notice(
                Tone::Warn,
                format!(
                    "{n} {noun}{} no longer pending after reconnecting",
                    if n == 1 { " is" } else { "s are" }
                ),
            );
            self.clamp_list();
        }
    }

    fn on_withdrawn(&mut self, id: &str, reason: WithdrawReason) {
        // Ended: a draft of it can never be sent.
        self.drafts.remove(id);
        let Some(pos) = self.entries.iter().position(|e| e.id() == id) else {
            return;
        };
        let entry = self.entries.remove(pos);
        let why = match reason {
            WithdrawReason::Answered => "answered in another UI",
            WithdrawReason::Timeout => "it timed out",
            WithdrawReason::Withdrawn => "the agent withdrew it",
            WithdrawReason::ProducerGone => "the agent went away",
            WithdrawReason::Shutdown => "askbusd shut down",
        };
        let open = self.view == View::Dialog(id.to_owned());
        let what = if open { "Closed" } else { "Gone" };
        self.notice(
            Tone::Warn,
            format!("{what}: {} from {} — {why}", entry.noun(), entry.who()),
        );
        if open {
            self.after_close();
        } else {
            self.clamp_list();
        }
    }

    fn on_error(&mut self, e: ErrorFrame) {
        let sent = e
            .correlation_id
            .as_ref()
            .and_then(|id| self.sent.remove(id));
        let Some(entry) = sent else {
            self.notice(Tone::Bad, format!("askbusd: {}: {}", e.code, e.message));
            return;
        };
        let whom = entry.who();
        if e.code.known() == Some(ErrorCode::NotPending) {
            self.notice(
                Tone::Bad,
                format!("✗ Not delivered: {whom}'s request was already answered or gone"),
            );
            return;
        }
        // Refused, yet still pending (an origin node out of reach, a limit): the request
        // comes back as the person left it, to try again.
        self.notice(
            Tone::Bad,
            format!(
                "✗ Not delivered to {whom}: {} (kept here to try again)",
                e.message
            ),
        );
        self.restore(entry);
    }

    /// A request whose answer did not get through, back in the list; open again when the
    /// person is not in another dialog.
    fn restore(&mut self, mut entry: Entry) {
        // While disconnected, the next replay says whether it is still pending.
        entry.stale = matches!(self.conn, Conn::Down { .. });
        let id = entry.id().to_owned();
        self.insert(entry);
        if self.view == View::List {
            self.view = View::Dialog(id.clone());
        }
        if let Some(pos) = self.entries.iter().position(|e| e.id() == id) {
            if self.view == View::Dialog(id) {
                self.list_cursor = pos;
            }
        }
    }

    /// Who asked the request sent as `id`, now that its ack came ("" if unknown).
    fn sent_to(&mut self, id: &str) -> String {
        self.sent.remove(id).map(|e| e.who()).unwrap_or_default()
    }

    /// Standard input was a pipe and it ended with `bytes` of text (the asking side's output
    /// in `askbus ask … | askbus ui`): it is printed when the UI quits.
    pub fn on_piped_input(&mut self, bytes: usize) {
        self.piped = Some(bytes);
    }

    /// askbus's "always" rule for `id` is written (allowing `summary`), before its decision
    /// goes out.
    pub fn on_rule_written(&mut self, id: &str, summary: Option<&str>) {
        if let Some(s) = summary {
            self.rules.insert(id.to_owned(), s.to_owned());
        }
    }

    /// A send failed at the socket: the daemon never had the answer.
    pub fn on_send_failed(&mut self, id: &str, error: &str) {
        match self.sent.remove(id) {
            Some(entry) => {
                self.notice(
                    Tone::Bad,
                    format!("✗ Not delivered to {}: {error} (kept here)", entry.who()),
                );
                self.restore(entry);
            }
            None => self.notice(Tone::Bad, format!("✗ Not delivered: {error}")),
        }
    }

    /// The dialog in view went away: show the next one if it is the only one left.
    fn after_close(&mut self) {
        self.view = View::List;
        if self.entries.len() == 1 {
            self.view = View::Dialog(self.entries[0].id().to_owned());
        }
        self.clamp_list();
    }

    fn clamp_list(&mut self) {
        self.list_cursor = self.list_cursor.min(self.entries.len().saturating_sub(1));
    }

    pub fn on_paste(&mut self, text: &str) {
        match self.open_entry_mut().map(|e| &mut e.ask) {
            Some(Ask::Question { dialog, .. }) => dialog.handle_paste(text),
            Some(Ask::Approval { decision, .. }) => decision.handle_paste(text),
            None => {}
        }
    }

    /// The recent history came (or why not), for the open history view.
    pub fn on_history(&mut self, result: Result<Vec<askbus::history::HistoryRecord>, String>) {
        if let Some(h) = &mut self.history {
            h.loaded(result);
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(h) = &mut self.history {
            return match h.handle_key(key) {
                recent::Key::Stay => None,
                recent::Key::Close => {
                    self.history = None;
                    None
                }
                recent::Key::Reload => {
                    *h = History::loading();
                    Some(Action::LoadHistory)
                }
            };
        }
        if self.view == View::List {
            return self.list_key(key, ctrl);
        }
        if ctrl && key.code == KeyCode::Char('l') {
            if let Some(pos) = self.open_entry().and_then(|e| {
                let id = e.id().to_owned();
                self.entries.iter().position(|x| x.id() == id)
            }) {
                self.list_cursor = pos;
            }
            self.view = View::List;
            return None;
        }
        let connected = self.conn == Conn::Connected;
        let entry = self.open_entry_mut()?;
        if let Some(m) = scroll_key(entry, &key, ctrl) {
            entry.scroll.scroll(m);
            return None;
        }
        let id = entry.id().to_owned();
        let whom = entry.who();
        let action = match &mut entry.ask {
            Ask::Question { dialog, .. } => {
                // A key that moves the focus brings it back into view.
                entry.scroll.follow();
                match dialog.handle_key(key) {
                    Outcome::Continue => return None,
                    Outcome::Submit(answers) => Action::Answer {
                        id: id.clone(),
                        answers,
                    },
                    Outcome::Dismiss => Action::Dismiss { id: id.clone() },
                }
            }
            // The buttons stay on screen: the details keep the scroll the person gave them.
            Ask::Approval { decision, .. } => match decision.handle_key(key) {
                approval::Outcome::Continue => return None,
                approval::Outcome::Decide {
                    outcome,
                    message,
                    rule,
                } => Action::Decide {
                    id: id.clone(),
                    outcome,
                    message,
                    rule,
                },
                approval::Outcome::Dismiss => Action::DismissApproval { id: id.clone() },
            },
        };
        if !connected {
            self.notice(
                Tone::Bad,
                "Not connected to askbusd: nothing was sent (it is kept here)",
            );
            return None;
        }
        if let Some(pos) = self.entries.iter().position(|e| e.id() == id) {
            let entry = self.entries.remove(pos);
            self.sent.insert(id, entry);
        }
        self.notice(Tone::Info, format!("Sending to {whom}…"));
        self.after_close();
        Some(action)
    }

    fn list_key(&mut self, key: KeyEvent, ctrl: bool) -> Option<Action> {
        let n = self.entries.len();
        match key.code {
            KeyCode::Char('q') if !ctrl => return Some(Action::Quit),
            KeyCode::Char('h') if !ctrl => {
                self.history = Some(History::loading());
                return Some(Action::LoadHistory);
            }
            KeyCode::Char('c') if ctrl => return Some(Action::Quit),
            KeyCode::Up | KeyCode::Char('k') if n > 0 => {
                self.list_cursor = (self.list_cursor + n - 1) % n
            }
            KeyCode::Down | KeyCode::Char('j') if n > 0 => {
                self.list_cursor = (self.list_cursor + 1) % n
            }
            KeyCode::Enter | KeyCode::Right | KeyCode::Char(' ') if n > 0 => {
                self.view = View::Dialog(self.entries[self.list_cursor].id().to_owned());
            }
            KeyCode::Char(d @ '1'..='9') if !ctrl => {
                let i = d as usize - '1' as usize;
                if i < n {
                    self.list_cursor = i;
                    self.view = View::Dialog(self.entries[i].id().to_owned());
                }
            }
            _ => {}
        }
        None
    }
}

/// A key that scrolls the dialog instead of acting on it: PgUp/PgDn always; Home/End unless
/// a text field has them (then Ctrl+Home/Ctrl+End); ↑ on the first row and ↓ on the last
/// (or anywhere without a list) while lines are hidden that way, before ↑/↓ wrap around.
fn scroll_key(entry: &Entry, key: &KeyEvent, ctrl: bool) -> Option<Move> {
    let (editing, edges) = match &entry.ask {
        Ask::Question { dialog, .. } => (dialog.is_editing(), dialog.cursor_edges()),
        // ↑/↓ are the buttons': only the page keys scroll an approval's details.
        Ask::Approval { decision, .. } => (decision.is_editing(), Some((false, false))),
    };
    let s = &entry.scroll;
    match key.code {
        KeyCode::PageUp => Some(Move::PageUp),
        KeyCode::PageDown => Some(Move::PageDown),
        KeyCode::Home if ctrl || !editing => Some(Move::Top),
        KeyCode::End if ctrl || !editing => Some(Move::Bottom),
        KeyCode::Up if s.hidden_above() && edges.is_none_or(|(first, _)| first) => {
            Some(Move::LineUp)
        }
        KeyCode::Down if s.hidden_below() && edges.is_none_or(|(_, last)| last) => {
            Some(Move::LineDown)
        }
        _ => None,
    }
}
/// "Approval" from "approval".
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
