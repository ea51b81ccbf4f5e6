//! The relay between the editor and the agent: every line forwarded as it came, in order,
//! and the agent's permission requests and elicitations raced between the editor and askbus.
//! The first answer wins: the other side's copy is withdrawn (`tool-confirmation-cancel` /
//! `ask-user-cancel` toward askbusd, `$/cancel_request` toward the editor, whose late reply
//! is then dropped here). It holds the requests in flight, the editor requests whose answers
//! it reads (`initialize` for the agent's name, `session/new` for the session's cwd), and the
//! sessions' cwds: nothing else.
//!
//! `ask` is the askbus side (asking, the outcome, withdrawals), `refuse` what the relay
//! refuses. The pumps are plain threads with blocking I/O (a run of forwarded lines costs a
//! look, one scan for the needles and a splice, or a read, the scan and a write); askbus runs
//! on the tokio runtime whose handle the relay holds.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedSender;

use askbus::client::Producer;
use askbus::protocol::{CancelReason, NoUiPolicy};

mod ask;
mod refuse;

use super::elicit::Elicitation;
use super::out::Out;
use super::permission::OptionMap;
use super::wire::{self, Envelope, IdKey};
use super::{Event, Fallback, Gate};

/// Why an askbus request is withdrawn when the editor answered its copy first.
fn answered_in_editor() -> CancelReason {
    CancelReason::AnsweredElsewhere {
        via: Some("acp".into()),
    }
}

/// How the relay routes and asks.
#[derive(Debug, Clone)]
pub struct Options {
    pub socket: PathBuf,
    pub gate: Gate,
    pub fallback: Fallback,
    pub timeout_ms: Option<u64>,
    pub no_ui: Option<NoUiPolicy>,
    /// The producer name announced to the UIs.
    pub client: String,
    /// The agent's name until its `initialize` answer says better (the command's file name).
    pub agent_command: String,
    /// The longest line read whole; a longer one is passed on unread, in pieces.
    pub max_line: usize,
}

/// What an intercepted request is, to answer it when nobody decided.
#[derive(Clone)]
enum What {
    Permission(OptionMap),
    Elicitation(Arc<Elicitation>),
}

impl What {
    /// Nobody decided (timeout, `--fallback deny`): reject / cancel.
    fn denied(&self) -> Value {
        match self {
            What::Permission(o) => o.denied(),
            What::Elicitation(e) => e.denied(),
        }
    }

    /// The editor cancelled the session's turn.
    fn cancelled(&self) -> Value {
        match self {
            What::Permission(o) => o.cancelled(),
            What::Elicitation(e) => e.denied(),
        }
    }
}

/// A request of the agent that askbus was asked.
struct InFlight {
    /// The request line as the agent wrote it, for the editor when it is handed over late.
    line: Vec<u8>,
    session: Option<String>,
    /// Whether the editor was sent it (and so must answer it, or be told it is cancelled).
    editor_saw: bool,
    /// The askbus request, while askbus holds it.
    correlation_id: Option<String>,
    what: What,
}

/// An editor request whose answer the relay reads on its way back.
enum Tracked {
    Initialize,
    NewSession { cwd: Option<String> },
}

#[derive(Default)]
struct State {
    inflight: HashMap<IdKey, InFlight>,
    /// Requests askbus answered while the editor was still asked: its late reply is dropped.
    swallow: HashSet<IdKey>,
    tracked: HashMap<IdKey, Tracked>,
    /// `name/version` from the agent's `initialize` answer.
    agent: Option<String>,
    /// Each session's cwd.
    sessions: HashMap<String, String>,
}

pub struct Relay {
    opts: Options,
    rt: Handle,
    pub to_agent: Out,
    pub to_editor: Out,
    state: Mutex<State>,
    producer: tokio::sync::Mutex<Option<Arc<Producer>>>,
    events: UnboundedSender<Event>,
    withdrawals: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Relay {
    pub fn new(
        opts: Options,
        rt: Handle,
        to_agent: Out,
        to_editor: Out,
        events: UnboundedSender<Event>,
    ) -> Relay {
        Relay {
            opts,
            rt,
            to_agent,
            to_editor,
            state: Mutex::new(State::default()),
            producer: tokio::sync::Mutex::new(None),
            events,
            withdrawals: Mutex::new(Vec::new()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn to_editor(&self, line: &[u8], flush: bool) {
        if !self.to_editor.write(line, flush) {
            let _ = self.events.send(Event::EditorGone);
        }
    }

    fn to_agent(&self, line: &[u8], flush: bool) {
        // A write to an agent that is gone fails; its exit is what ends the relay.
        self.to_agent.write(line, flush);
    }

    pub fn max_line(&self) -> usize {
        self.opts.max_line
    }

    /// Whether a run of the agent's complete lines needs no look but the one this makes: no
    /// answer the relay reads is awaited, and no line in it names a method that matters.
    pub fn passes_through(&self, lines: &[u8]) -> bool {
        let (cancels, tracked) = {
            let st = self.state();
            (!st.inflight.is_empty(), !st.tracked.is_empty())
        };
        !tracked && !wire::agent_line_may_matter(lines, cancels)
    }

    /// Writes a run of the agent's lines to the editor as they are, in one write.
    pub fn to_editor_run(&self, lines: &[u8]) {
        if !self.to_editor.write_through(lines) {
            let _ = self.events.send(Event::EditorGone);
        }
    }

    /// Moves a run of the agent's lines to the editor as they are: `held`, the start of its
    /// first line, already read, then `len` bytes still queued in the agent's pipe `from`.
    pub fn to_editor_spliced(&self, held: &[u8], from: std::os::fd::BorrowedFd<'_>, len: usize) {
        if !self.to_editor.splice_run(held, from, len) {
            let _ = self.events.send(Event::EditorGone);
        }
    }

    /// A line the agent wrote. `more`: the reader already holds the next one.
    pub fn from_agent_line(self: &Arc<Self>, line: &[u8], more: bool) {
        if self.passes_through(line) {
            return self.to_editor(line, !more);
        }
        let Some(env) = Envelope::parse(line) else {
            // A line the parser refuses (not JSON, or a key written twice, which readers
            // read differently) that names a method that matters: with --gate askbus it
            // never reaches the editor, and nobody can approve it.
            if self.opts.gate == Gate::Askbus && wire::agent_line_may_matter(line, false) {
                eprintln!(
                    "askbus acp: dropped a line of the agent's that may be a permission request or an elicitation but is not one JSON-RPC message{}",
                    if wire::is_duplicate_key(line) { " (a key written twice)" } else { "" }
                );
                return;
            }
            return self.to_editor(line, !more);
        };
        match (env.method.as_deref(), env.id()) {
            (Some(m @ (wire::REQUEST_PERMISSION | wire::ELICITATION_CREATE)), id)
                if self.opts.gate != Gate::Editor =>
            {
                match id {
                    Ok(Some(id)) => {
                        let params = env.params_value();
                        self.intercept(line, m == wire::REQUEST_PERMISSION, id, params)
                    }
                    // A request without an id cannot be answered: asked nowhere.
                    Ok(None) => eprintln!("askbus acp: dropped a {m} without an id"),
                    Err(raw) => {
                        eprintln!("askbus acp: refused a {m} whose id is {raw} (ids are strings or integers)");
                        let error = wire::error_line(
                            Some(&raw),
                            wire::INVALID_REQUEST,
                            "askbus acp: a request's id must be a string or an integer",
                        );
                        self.to_agent(&error, true)
                    }
                }
            }
            (Some(wire::CANCEL_REQUEST), Ok(None)) => {
                let id = IdKey::of_value(&env.params_value()["requestId"]);
                match id.filter(|id| self.state().inflight.contains_key(id)) {
                    Some(id) => self.agent_cancelled(line, id),
                    None => self.to_editor(line, !more),
                }
            }
            (None, Ok(Some(id))) => {
                let t = self.state().tracked.remove(&id);
                if let Some(t) = t {
                    self.read_answer(t, line);
                }
                self.to_editor(line, !more)
            }
            _ => self.to_editor(line, !more),
        }
    }

    /// A line the editor wrote. Unparsed unless a request of the agent is in flight (the
    /// editor's answer to it is looked for) or the line may name a method the relay reads.
    pub fn from_editor(self: &Arc<Self>, line: &[u8], more: bool) {
        let waiting = {
            let st = self.state();
            !st.inflight.is_empty() || !st.swallow.is_empty()
        };
        if !waiting && !wire::editor_line_may_matter(line) {
            return self.to_agent(line, !more);
        }
        let Some(env) = Envelope::parse(line) else {
            // While the agent waits for an answer, a line with a key written twice (which
            // readers read differently) could pass for one: it is dropped.
            if waiting && wire::is_duplicate_key(line) {
                eprintln!("askbus acp: dropped a line of the editor's with a key written twice");
                return;
            }
            return self.to_agent(line, !more);
        };
        match (env.method.as_deref(), env.id_key()) {
            (None, Some(id)) => {
                let mut st = self.state();
                if st.inflight.get(&id).is_some_and(|f| !f.editor_saw) {
                    // An answer to a request the editor was never sent (--gate askbus): a
                    // guess, not a decision.
                    drop(st);
                    eprintln!(
                        "askbus acp: the editor answered request {id}, which it was not sent; its answer was not passed on"
                    );
                    return;
                }
                if let Some(f) = st.inflight.remove(&id) {
                    drop(st);
                    return self.editor_answered(id, f, line);
                }
                if st.swallow.remove(&id) {
                    drop(st);
                    eprintln!(
                        "askbus acp: the editor answered request {id} after askbus had; its answer was not passed on"
                    );
                    return;
                }
                drop(st);
                self.to_agent(line, !more)
            }
            (Some("initialize"), Some(id)) => {
                self.state().tracked.insert(id, Tracked::Initialize);
                self.to_agent(line, !more)
            }
            (Some("session/new"), Some(id)) => {
                let cwd = env.params_value()["cwd"].as_str().map(str::to_owned);
                self.state().tracked.insert(id, Tracked::NewSession { cwd });
                self.to_agent(line, !more)
            }
            (Some("session/load" | "session/resume" | "session/fork"), _) => {
                let p = env.params_value();
                if let (Some(s), Some(cwd)) = (p["sessionId"].as_str(), p["cwd"].as_str()) {
                    self.state().sessions.insert(s.to_owned(), cwd.to_owned());
                }
                self.to_agent(line, !more)
            }
            (Some(wire::SESSION_CANCEL), None) => {
                let session = env.params_value()["sessionId"].as_str().map(str::to_owned);
                self.to_agent(line, true);
                if let Some(s) = session {
                    self.cancel_session(&s);
                }
            }
            _ => self.to_agent(line, !more),
        }
    }

    /// The agent's answer to an editor request the relay reads.
    fn read_answer(&self, t: Tracked, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(wire::trim_newline(line)) else {
            return;
        };
        let result = &v["result"];
        let mut st = self.state();
        match t {
            Tracked::Initialize => {
                let info = &result["agentInfo"];
                if let Some(name) = info["name"].as_str() {
                    st.agent = Some(match info["version"].as_str() {
                        Some(v) => format!("{name}/{v}"),
                        None => name.to_owned(),
                    });
                }
            }
            Tracked::NewSession { cwd } => {
                if let (Some(s), Some(cwd)) = (result["sessionId"].as_str(), cwd) {
                    st.sessions.insert(s.to_owned(), cwd);
                }
            }
        }
    }
}
