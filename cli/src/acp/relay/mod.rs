//! The relay between the editor and the agent: every line forwarded as it came, in order,
//! and the agent's permission requests and elicitations raced between the editor and askbus.
//! The first answer wins: the other side's copy is withdrawn (`tool-confirmation-cancel` /
//! `ask-user-cancel` toward askbusd, `$/cancel_request` toward the editor, whose late reply
//! is then dropped here). It holds the requests in flight, the editor requests whose answers
//! it reads (`initialize` for the agent's name, `session/new` for the session's cwd), and the
//! sessions' cwds: nothing else.
//!
//! The pumps are plain threads with blocking I/O (a forwarded line costs a read, a substring
//! test and a write); askbus runs on the tokio runtime whose handle the relay holds.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedSender;

use askbus::client::{new_correlation_id, Ask, Producer, ProducerOptions};
use askbus::protocol::{CancelReason, NoUiPolicy, RequestContext};

mod refuse;

use super::elicit::{self, Elicitation};
use super::out::Out;
use super::permission::{self, OptionMap};
use super::wire::{self, Envelope, IdKey};
use super::{Decision, Event, Fallback, Gate};

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

/// What askbus is asked, for one intercepted request.
enum Body {
    Approval(Box<askbus::client::Confirm>),
    Questions(Box<Ask>),
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

    /// A permission request or elicitation of the agent: asked through askbus (and sent on to
    /// the editor with `--gate both`), or handed to the fallback when askbus cannot ask it.
    fn intercept(self: &Arc<Self>, line: &[u8], permission: bool, id: IdKey, params: Value) {
        let method = if permission {
            wire::REQUEST_PERMISSION
        } else {
            wire::ELICITATION_CREATE
        };
        if self.reused(&id, permission, &params) {
            return;
        }
        let session = params["sessionId"].as_str().map(str::to_owned);
        let mapped = if permission {
            permission::map(&params).map(|p| {
                let confirm = Box::new(p.confirm);
                (
                    What::Permission(p.options),
                    Body::Approval(confirm),
                    p.title,
                )
            })
        } else {
            elicit::map(&params).map(|e| {
                let ask = Ask {
                    questions: e.questions.clone(),
                    ..Ask::default()
                };
                let title = e.title.clone();
                (
                    What::Elicitation(Arc::new(e)),
                    Body::Questions(Box::new(ask)),
                    title,
                )
            })
        };
        let (what, body, title) = match mapped {
            Ok(m) => m,
            Err(why) => {
                eprintln!("askbus acp: {method} {id} cannot be asked through askbus: {why}");
                // The editor sees everything with --gate both; else the fallback decides.
                if self.opts.gate == Gate::Both {
                    return self.to_editor(line, true);
                }
                return self.unavailable(line, &id, None, permission, &params);
            }
        };
        let producer = self.rt.block_on(self.producer());
        let Some(producer) = producer else {
            return self.unavailable(line, &id, Some(&what), permission, &params);
        };
        let cid = new_correlation_id();
        let editor_saw = self.opts.gate == Gate::Both;
        let context = self.context(session.as_deref(), &title);
        self.state().inflight.insert(
            id.clone(),
            InFlight {
                line: line.to_vec(),
                session,
                editor_saw,
                correlation_id: Some(cid.clone()),
                what: what.clone(),
            },
        );
        if editor_saw {
            self.to_editor(line, true);
        }
        let me = self.clone();
        let (timeout_ms, no_ui) = (self.opts.timeout_ms, self.opts.no_ui);
        self.rt.spawn(async move {
            // Withdrawn before this task ran (the editor answered at once, the agent reused
            // the id): never asked. Past this check the ask is registered in its first poll,
            // before any withdrawal (spawned later, on the one worker) can send its cancel.
            let wanted = me
                .state()
                .inflight
                .get(&id)
                .is_some_and(|f| f.correlation_id.as_deref() == Some(cid.as_str()));
            if !wanted {
                return;
            }
            let decision = match (body, &what) {
                (Body::Approval(mut c), What::Permission(options)) => {
                    c.correlation_id = Some(cid);
                    c.timeout_ms = timeout_ms;
                    c.no_ui = no_ui;
                    c.context = context;
                    let confirmation = producer.confirm(*c).await;
                    permission::decision(&confirmation, options)
                }
                (Body::Questions(mut a), What::Elicitation(e)) => {
                    a.correlation_id = Some(cid);
                    a.timeout_ms = timeout_ms;
                    a.no_ui = no_ui;
                    a.context = context;
                    match producer.ask(*a).await {
                        Ok(r) => elicit::decision(&r, e),
                        Err(err) => Decision::Unavailable(err.to_string()),
                    }
                }
                _ => unreachable!("a body is asked as what it was mapped to"),
            };
            me.askbus_ended(id, decision);
        });
    }

    /// Askbus cannot take the request (no daemon, or one it cannot ask): `--fallback editor`
    /// hands it to the editor as if askbus were not there; `--fallback deny` denies it.
    fn unavailable(
        &self,
        line: &[u8],
        id: &IdKey,
        what: Option<&What>,
        permission: bool,
        params: &Value,
    ) {
        match self.opts.fallback {
            Fallback::Editor => self.to_editor(line, true),
            Fallback::Deny => {
                let result = match what {
                    Some(w) => w.denied(),
                    None if permission => permission::deny_unmapped(params),
                    None => serde_json::json!({"action": "cancel"}),
                };
                eprintln!(
                    "askbus acp: denied request {id}: askbus cannot ask it (--fallback deny)"
                );
                self.to_agent(&wire::result_line(id, &result), true)
            }
        }
    }

    /// How askbus ended a request: the first answer wins, the editor's copy is cancelled.
    fn askbus_ended(&self, id: IdKey, decision: Decision) {
        let mut st = self.state();
        let Some(f) = st.inflight.get_mut(&id) else {
            // The editor answered first, or the turn was cancelled.
            return;
        };
        let result = match decision {
            Decision::Withdrawn => return,
            Decision::Decided(v) => v,
            Decision::Ended => f.what.denied(),
            Decision::Unavailable(why) => match self.opts.fallback {
                Fallback::Deny => {
                    eprintln!("askbus acp: denied request {id}: {why} (--fallback deny)");
                    f.what.denied()
                }
                Fallback::Editor => {
                    f.correlation_id = None;
                    if f.editor_saw {
                        eprintln!("askbus acp: request {id} is the editor's to answer: {why}");
                        return;
                    }
                    eprintln!("askbus acp: request {id} goes to the editor: {why}");
                    f.editor_saw = true;
                    let line = f.line.clone();
                    drop(st);
                    return self.to_editor(&line, true);
                }
            },
        };
        let f = st.inflight.remove(&id).expect("found above");
        if f.editor_saw {
            st.swallow.insert(id.clone());
        }
        drop(st);
        self.to_agent(&wire::result_line(&id, &result), true);
        if f.editor_saw {
            self.to_editor(&wire::cancel_request_line(&id), true);
        }
    }

    /// The editor cancelled a session's turn: its requests are withdrawn from askbus, and
    /// those the editor never saw are answered `cancelled` here (the editor answers its own).
    fn cancel_session(self: &Arc<Self>, session: &str) {
        let mut answers = Vec::new();
        let mut withdraw = Vec::new();
        {
            let mut st = self.state();
            let ids: Vec<IdKey> = st
                .inflight
                .iter()
                .filter(|(_, f)| f.session.as_deref() == Some(session))
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                let f = st.inflight.get_mut(&id).expect("listed above");
                withdraw.extend(f.correlation_id.take());
                if !f.editor_saw {
                    let f = st.inflight.remove(&id).expect("listed above");
                    answers.push(wire::result_line(&id, &f.what.cancelled()));
                }
            }
        }
        for cid in withdraw {
            self.withdraw(cid, CancelReason::Withdrawn);
        }
        for line in answers {
            self.to_agent(&line, true);
        }
    }

    /// The agent cancelled one of its requests (`$/cancel_request`).
    fn agent_cancelled(self: &Arc<Self>, line: &[u8], id: IdKey) {
        let mut st = self.state();
        let Some(f) = st.inflight.get_mut(&id) else {
            drop(st);
            return self.to_editor(line, true);
        };
        let cid = f.correlation_id.take();
        if f.editor_saw {
            // The editor answers it (ACP: a cancelled request still gets its response).
            drop(st);
            self.to_editor(line, true);
        } else {
            st.inflight.remove(&id);
            drop(st);
            self.to_agent(&wire::cancelled_error_line(&id), true);
        }
        if let Some(cid) = cid {
            self.withdraw(cid, CancelReason::Withdrawn);
        }
    }

    /// Withdraws an askbus request, saying why (its answer, if one races in, is ignored).
    fn withdraw(self: &Arc<Self>, cid: String, why: CancelReason) {
        let me = self.clone();
        let task = self.rt.spawn(async move {
            let producer = me.producer.lock().await.clone();
            if let Some(producer) = producer {
                let _ = producer.cancel_because(&cid, &why).await;
            }
        });
        let mut tasks = self.withdrawals.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// The agent is gone: every askbus request it left is withdrawn (UIs take it off the
    /// screen), waiting a little for the withdrawals to reach askbusd.
    pub async fn withdraw_all(&self) {
        let cids: Vec<String> = {
            let mut st = self.state();
            st.inflight
                .drain()
                .filter_map(|(_, f)| f.correlation_id)
                .collect()
        };
        let producer = self.producer.lock().await.clone();
        if let Some(producer) = producer {
            for cid in cids {
                let _ = tokio::time::timeout(Duration::from_secs(2), producer.cancel(&cid)).await;
            }
        }
        let tasks: Vec<_> = self
            .withdrawals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
        }
    }

    /// The daemon connection, made on first need and again after a failed attempt (an
    /// established one reconnects by itself across a daemon restart).
    async fn producer(&self) -> Option<Arc<Producer>> {
        let mut p = self.producer.lock().await;
        if p.is_none() {
            let options = ProducerOptions {
                client: Some(self.opts.client.clone()),
                ..ProducerOptions::default()
            };
            match Producer::connect_with(&self.opts.socket, options).await {
                Ok(producer) => *p = Some(Arc::new(producer)),
                Err(e) => eprintln!("askbus acp: {e}"),
            }
        }
        p.clone()
    }

    /// The request's context: the agent (its `initialize` answer, else the command), the
    /// session, its cwd and project, and a title.
    fn context(&self, session: Option<&str>, title: &str) -> Option<RequestContext> {
        let st = self.state();
        let cwd = session.and_then(|s| st.sessions.get(s)).cloned();
        let project = std::env::var("ASKBUS_PROJECT")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .or_else(|| {
                cwd.as_deref()
                    .and_then(|c| Path::new(c).file_name())
                    .map(|n| n.to_string_lossy().into_owned())
            });
        let agent = st
            .agent
            .clone()
            .unwrap_or_else(|| self.opts.agent_command.clone());
        let clean = |v: Option<String>, max| {
            v.map(|v| crate::hook::one_line(&v, max))
                .filter(|v| !v.is_empty())
        };
        RequestContext {
            agent: clean(Some(agent), 256),
            session: clean(session.map(str::to_owned), 256),
            project: clean(project, 128),
            cwd: clean(cwd, 4096),
            title: clean(Some(title.to_owned()), 256),
            ..RequestContext::default()
        }
        .into_option()
    }
}
