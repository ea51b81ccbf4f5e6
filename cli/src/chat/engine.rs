//! The engine of `askbus chat`, the bus side: one UI subscription of askbusd, which request
//! shows in which message (at most `max_messages` live, the rest in one digest, promoted as
//! others end), each request's message edited as it changes and when it ends, the state
//! saved for a restart, and the replay after a reconnect. What the chat sends back (taps,
//! replies) is `inbound`.

mod countdown;
mod inbound;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use askbus::client::{UiAnswerer, UiEvent, UiSubscription, Update};
use askbus::protocol::{Code, ErrorCode, SubscribeFilter};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::term;

use super::card::{self, Block, Button, Card, User, View};
use super::platform::{In, Msg, Out, DIGEST_KEY};
use super::seal::{self, Handle, Sealer};
use super::state::{SavedMessage, StateFile};
use super::text::{title_case, withdrawn_text};
use super::{CommonArgs, DIGEST_EVERY, DIGEST_LINES, REPLAY_GRACE, SAVE_EVERY};

/// Replies kept for a message not known yet (a chat's replies to other messages included),
/// and taps kept for the replay.
const EARLY_REPLIES: usize = 32;

/// A tap kept for the replay: its reply handle, who, its data, its message.
type HeldTap = (String, User, String, Option<Msg>);

/// One pending request.
struct Entry {
    card: Card,
    digest: String,
    handle: Handle,
    seq: u64,
    generation: u64,
    msg: Option<Msg>,
    /// A post is on its way (its `Posted` is awaited).
    posting: bool,
    /// Its message is one of the `live` ones (posted, being posted, or adopted).
    live: bool,
    /// A prompt asked for (with the tap that asked) before our post's `Posted` came back:
    /// sent once it does (the prompt names the message).
    prompt: Option<Option<String>>,
    /// When the countdown its message shows changes next (`countdown`).
    countdown: Option<Instant>,
}

/// The signed-link maker, when `--web-url` is given.
struct Links {
    base: String,
    key: crate::links::LinkKey,
}

pub(super) struct Engine {
    via: &'static str,
    client: String,
    out: mpsc::UnboundedSender<Out>,
    rx: Option<mpsc::UnboundedReceiver<In>>,
    sealer: Sealer,
    filter: SubscribeFilter,
    allowed: HashSet<String>,
    redact: bool,
    links: Option<Links>,
    max_live: usize,
    entries: HashMap<String, Entry>,
    by_seq: HashMap<u64, String>,
    by_handle: HashMap<Handle, String>,
    by_msg: HashMap<Msg, String>,
    /// Ended while their post was on its way: edited to the outcome once posted.
    limbo: HashMap<u64, Card>,
    /// Replies to a message not known yet: the platform's poller can hand over a reply
    /// before its sender hands over the `Posted` (or `Prompted`) of the message it answers.
    /// Applied when that message is known; the oldest dropped past [`EARLY_REPLIES`].
    early: Vec<(User, Msg, String)>,
    /// Taps naming no request we know, made before askbusd's replay was in (`inbound`).
    held: Vec<HeldTap>,
    queued: BTreeSet<(u64, String)>,
    live: usize,
    digest_msg: Option<Msg>,
    digest_posting: bool,
    digest_dirty: bool,
    digest_after: Option<Instant>,
    pub(super) state: StateFile,
    save_at: Option<Instant>,
    answerer: Option<UiAnswerer>,
    seq: u64,
    generation: u64,
    replay_left: u64,
    sweep_at: Option<Instant>,
}

impl Engine {
    pub(super) fn new(
        socket: &Path,
        via: &'static str,
        common: CommonArgs,
        state: StateFile,
        state_path: &Path,
        out: mpsc::UnboundedSender<Out>,
        rx: mpsc::UnboundedReceiver<In>,
    ) -> Result<Engine> {
        let key = crate::links::LinkKey::load_or_create(&state_path.with_extension("key"))?;
        let links = match common.web_url {
            Some(base) => {
                if !(base.starts_with("https://") || base.starts_with("http://")) {
                    bail!("--web-url must start with https:// (or http://)");
                }
                let path = crate::links::key_path(common.link_key.as_deref(), socket);
                Some(Links {
                    base: base.trim_end_matches('/').to_owned(),
                    key: crate::links::LinkKey::load_or_create(&path)?,
                })
            }
            None => None,
        };
        let digest_msg = state.saved.digest.clone();
        Ok(Engine {
            via,
            client: format!("askbus-chat-{via}/{}", env!("CARGO_PKG_VERSION")),
            out,
            rx: Some(rx),
            sealer: Sealer::new(key),
            filter: common.filter.filter(),
            allowed: common.allow_users.into_iter().collect(),
            redact: common.redact,
            links,
            max_live: common.max_messages.max(1),
            entries: HashMap::new(),
            by_seq: HashMap::new(),
            by_handle: HashMap::new(),
            by_msg: HashMap::new(),
            limbo: HashMap::new(),
            early: Vec::new(),
            held: Vec::new(),
            queued: BTreeSet::new(),
            live: 0,
            digest_dirty: digest_msg.is_some(),
            digest_msg,
            digest_posting: false,
            digest_after: None,
            state,
            save_at: None,
            answerer: None,
            seq: 0,
            generation: 0,
            replay_left: 0,
            sweep_at: None,
        })
    }

    pub(super) async fn run(&mut self, socket: &Path) -> Result<ExitCode> {
        // The platform is claimed as `via`: the decisions are recorded as made in it.
        let mut sub = UiSubscription::new(socket, Some(&self.client))
            .via(self.via)
            .filtered(self.filter.clone())
            .persistent();
        let mut rx = self.rx.take().expect("taken once");
        let mut was_down = false;
        loop {
            let wake = self.next_wake();
            tokio::select! {
                update = sub.next() => match update {
                    Ok(Update::Connected((pending, answerer))) => {
                        eprintln!("askbus chat: {} {} ({})", if was_down { "back on" } else { "watching" }, socket.display(), self.via);
                        was_down = false;
                        self.connected(pending, answerer);
                    }
                    Ok(Update::Event(event)) => self.event(event).await,
                    Ok(Update::Down { error, retry_in }) => {
                        self.answerer = None;
                        if !was_down {
                            eprintln!("askbus chat: {}; retrying in {}", term::sanitize(&crate::fail::connection_down(error)), crate::duration::short(retry_in));
                            was_down = true;
                        }
                    }
                    Err(e) => bail!("{e}"),
                },
                event = rx.recv() => match event {
                    Some(In::Fatal(e)) => bail!("{}: {}", self.via, term::sanitize(&e)),
                    Some(event) => self.platform(event).await,
                    None => bail!("the {} connection ended", self.via),
                },
                _ = crate::duration::sleep_until(wake) => self.tick(),
            }
            self.release_held().await;
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        let digest = if self.digest_dirty && !self.digest_posting {
            Some(self.digest_after.unwrap_or_else(Instant::now))
        } else {
            None
        };
        [digest, self.save_at, self.sweep_at, self.countdown_wake()]
            .into_iter()
            .flatten()
            .min()
    }

    fn tick(&mut self) {
        let now = Instant::now();
        if self.sweep_at.is_some_and(|at| at <= now) {
            self.sweep();
        }
        if self.digest_dirty && !self.digest_posting && self.digest_after.is_none_or(|at| at <= now)
        {
            self.flush_digest();
        }
        self.countdowns(now);
        if self.save_at.is_some_and(|at| at <= now) {
            self.save_at = None;
            if let Err(e) = self.state.save() {
                eprintln!("askbus chat: {e:#}");
            }
        }
    }

    fn dirty(&mut self) {
        self.state.touch();
        if self.save_at.is_none() {
            self.save_at = Some(Instant::now() + SAVE_EVERY);
        }
    }

    fn send(&self, op: Out) {
        // The worker lives as long as the engine; a closed channel shows as `None` from rx.
        let _ = self.out.send(op);
    }

    fn connected(&mut self, pending: u64, answerer: UiAnswerer) {
        self.answerer = Some(answerer);
        self.generation += 1;
        self.replay_left = pending;
        if pending == 0 {
            self.sweep();
        } else {
            self.sweep_at = Some(Instant::now() + REPLAY_GRACE);
        }
    }

    /// After a (re)connect's replay: what it did not bring ended while we were away, and what
    /// the state file names that is not pending any more ended while `askbus chat` was down.
    fn sweep(&mut self) {
        self.sweep_at = None;
        let generation = self.generation;
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.generation < generation)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.ended(&id, "Ended while askbus chat was away.".into());
        }
        let gone: Vec<(String, SavedMessage)> = self
            .state
            .saved
            .messages
            .iter()
            .filter(|(id, _)| !self.entries.contains_key(*id))
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        for (id, m) in gone {
            self.state.saved.messages.remove(&id);
            self.send(Out::Edit {
                msg: m.msg,
                view: View {
                    blocks: vec![Block::Note("Ended while askbus chat was away.".into())],
                    rows: Vec::new(),
                },
            });
            self.dirty();
        }
    }

    async fn event(&mut self, event: UiEvent) {
        match event {
            UiEvent::Request(r) => {
                let digest = seal::question_digest(&r);
                self.arrived(r.correlation_id.clone(), digest, Card::from_question(&r));
            }
            UiEvent::Approval(a) => {
                let digest = seal::approval_digest(&a);
                self.arrived(a.correlation_id.clone(), digest, Card::from_approval(&a));
            }
            UiEvent::Withdrawn {
                correlation_id,
                reason,
            }
            | UiEvent::ApprovalWithdrawn {
                correlation_id,
                reason,
            } => self.ended(&correlation_id, withdrawn_text(reason).into()),
            UiEvent::Ack { correlation_id, .. } => self.answered_here(&correlation_id),
            UiEvent::ApprovalAck(a) => self.answered_here(&a.correlation_id),
            UiEvent::Error(e) => {
                let Some(id) = e.correlation_id.clone() else {
                    eprintln!(
                        "askbus chat: askbusd: {}: {}",
                        e.code,
                        term::sanitize(&e.message)
                    );
                    return;
                };
                let Some(entry) = self.entries.get_mut(&id) else {
                    return;
                };
                if entry.card.sent().is_none() {
                    return;
                }
                if e.code == Code::Known(ErrorCode::NotPending) {
                    self.ended(&id, "Answered elsewhere first.".into());
                } else {
                    eprintln!(
                        "askbus chat: askbusd refused an answer to {}: {}",
                        term::sanitize(&id),
                        term::sanitize(&e.message)
                    );
                    entry.card.reopen();
                    self.redraw(&id);
                }
            }
        }
    }

    fn arrived(&mut self, id: String, digest: String, mut card: Card) {
        self.replay_left = self.replay_left.saturating_sub(1);
        let generation = self.generation;
        match self.entries.get_mut(&id) {
            Some(e) if e.digest == digest => {
                e.generation = generation;
                self.replay_done();
                return;
            }
            // The same correlationId asking something else: another request.
            Some(_) => self.ended(&id, "Replaced by a new request.".into()),
            None => {}
        }
        if let Some(l) = &self.links {
            let left = card.meta.timeout_ms / 1000;
            let exp = crate::links::now_unix() + left.clamp(60, 7 * 24 * 3600);
            if let Ok(link) = crate::links::Link::open(&id, &digest, exp) {
                card.open_url = Some(format!("{}/o/{}", l.base, l.key.sign(&link)));
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let handle = self.sealer.handle(&id, &digest);
        let saved = self
            .state
            .saved
            .messages
            .get(&id)
            .filter(|m| m.digest == digest)
            .cloned();
        let mut entry = Entry {
            card,
            digest,
            handle,
            seq,
            generation,
            msg: None,
            posting: false,
            live: false,
            prompt: None,
            countdown: None,
        };
        self.by_handle.insert(handle, id.clone());
        match saved {
            // Posted before a restart: that message is this request's; no new post.
            Some(m) => {
                entry.msg = Some(m.msg.clone());
                entry.countdown = entry.card.countdown_at();
                entry.live = true;
                self.live += 1;
                self.by_msg.insert(m.msg, id.clone());
                let redraw = m.version != 0;
                entry.card.version = m.version.wrapping_add(u16::from(redraw));
                self.entries.insert(id.clone(), entry);
                if redraw {
                    self.redraw(&id);
                }
            }
            None => {
                self.entries.insert(id.clone(), entry);
                if self.live < self.max_live && self.queued.is_empty() {
                    self.post(&id);
                } else {
                    self.queued.insert((seq, id));
                    self.digest_dirty = true;
                }
            }
        }
        self.replay_done();
    }

    fn replay_done(&mut self) {
        if self.replay_left == 0 && self.sweep_at.is_some() {
            self.sweep();
        }
    }

    fn sealed(&self, id: &str) -> Option<View<String>> {
        let e = self.entries.get(id)?;
        Some(self.seal_view(id, e))
    }

    fn seal_view(&self, id: &str, e: &Entry) -> View<String> {
        let view = if self.redact {
            e.card.redacted()
        } else {
            e.card.view()
        };
        let version = e.card.version;
        view.map(|a| self.sealer.seal(id, &e.digest, version, a.encode()))
    }

    fn post(&mut self, id: &str) {
        let Some(view) = self.sealed(id) else { return };
        let Some(e) = self.entries.get_mut(id) else {
            return;
        };
        e.posting = true;
        e.countdown = e.card.countdown_at();
        if !e.live {
            e.live = true;
            self.live += 1;
        }
        self.by_seq.insert(e.seq, id.to_owned());
        let key = e.seq.to_string();
        self.send(Out::Post { key, view });
    }

    fn redraw(&mut self, id: &str) {
        let Some(e) = self.entries.get_mut(id) else {
            return;
        };
        let Some(msg) = e.msg.clone() else { return };
        e.countdown = e.card.countdown_at();
        let e = &self.entries[id];
        let view = self.seal_view(id, e);
        let version = e.card.version;
        if let Some(m) = self.state.saved.messages.get_mut(id) {
            m.version = version;
        }
        self.dirty();
        self.send(Out::Edit { msg, view });
    }

    /// The request is over: its message shows `outcome` without buttons.
    fn ended(&mut self, id: &str, outcome: String) {
        let Some(mut e) = self.entries.remove(id) else {
            return;
        };
        self.by_handle.remove(&e.handle);
        self.queued.remove(&(e.seq, id.to_owned()));
        if self.state.saved.messages.remove(id).is_some() {
            self.dirty();
        }
        e.card.end(outcome);
        let view = View::<()>::clone_over(if self.redact {
            e.card.redacted()
        } else {
            e.card.view()
        });
        match (&e.msg, e.posting) {
            (Some(msg), _) => {
                self.by_msg.retain(|_, v| v != id);
                self.by_seq.remove(&e.seq);
                self.send(Out::Edit {
                    msg: msg.clone(),
                    view,
                });
            }
            (None, true) => {
                self.limbo.insert(e.seq, e.card);
            }
            (None, false) => self.digest_dirty = true,
        }
        if e.live {
            self.live -= 1;
            self.promote();
        }
        self.shrink();
    }

    /// Messages of their own for the oldest digest entries, while there is room.
    fn promote(&mut self) {
        while self.live < self.max_live {
            let Some((_, id)) = self.queued.pop_first() else {
                break;
            };
            self.digest_dirty = true;
            self.post(&id);
        }
    }

    fn shrink(&mut self) {
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
            self.by_handle.shrink_to_fit();
            self.by_seq.shrink_to_fit();
            self.by_msg.shrink_to_fit();
        }
    }

    /// This engine's answer won: the message names it and who gave it.
    fn answered_here(&mut self, id: &str) {
        let Some(e) = self.entries.get(id) else {
            return;
        };
        let outcome = match e.card.sent() {
            Some((by, what)) => {
                let verb = if e.card.is_approval() {
                    "Decided"
                } else {
                    "Answered"
                };
                format!("✅ {verb} in {} by {by}: {what}", title_case(self.via))
            }
            None => "Answered.".to_owned(),
        };
        self.ended(id, outcome);
    }

    fn flush_digest(&mut self) {
        self.digest_dirty = false;
        self.digest_after = Some(Instant::now() + DIGEST_EVERY);
        let n = self.queued.len();
        let view = if n == 0 {
            View {
                blocks: vec![Block::Note("Nothing more is waiting here.".into())],
                rows: Vec::new(),
            }
        } else {
            let mut blocks = vec![Block::Title(format!(
                "{n} more request{} waiting",
                if n == 1 { " is" } else { "s are" }
            ))];
            if !self.redact {
                for (_, id) in self.queued.iter().take(DIGEST_LINES) {
                    if let Some(e) = self.entries.get(id) {
                        blocks.push(Block::Note(format!("• {}", e.card.summary())));
                    }
                }
                if n > DIGEST_LINES {
                    blocks.push(Block::Note(format!("… and {} more", n - DIGEST_LINES)));
                }
            }
            blocks.push(Block::Note(
                "Each gets a message of its own as others end.".into(),
            ));
            let rows = match &self.links {
                Some(l) => vec![vec![Button::Link {
                    label: "Open askbus web".into(),
                    url: format!("{}/", l.base),
                }]],
                None => Vec::new(),
            };
            View { blocks, rows }
        };
        match (&self.digest_msg, n) {
            (Some(msg), _) => {
                self.send(Out::Edit {
                    msg: msg.clone(),
                    view,
                });
                if n == 0 {
                    self.digest_msg = None;
                    self.state.saved.digest = None;
                    self.dirty();
                }
            }
            (None, 0) => {}
            (None, _) => {
                self.digest_posting = true;
                self.send(Out::Post {
                    key: DIGEST_KEY.into(),
                    view,
                });
            }
        }
    }
}

impl View<()> {
    /// An outcome view: it has no taps, so it needs no seal.
    fn clone_over(view: View<card::Action>) -> View<String> {
        view.map(|_| String::new())
    }
}
