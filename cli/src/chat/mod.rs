//! `askbus chat telegram`: the requests on the bus as messages in a chat the person already
//! carries, answered there, over outbound connections only (no public URL, tunnel or port).
//! It is one more UI subscriber of the bus (like `askbus notify` and `askbus ui`), so it
//! composes with every other UI under first-answer-wins: the message of a request that ends
//! elsewhere is edited to its outcome and loses its buttons.
//!
//! A subcommand, not a sink of `askbus notify`: a two-way chat has a life of its own (an
//! inbound connection to keep and resume, per-request messages to edit, who may answer,
//! a state file, a cursor) that shares nothing with notify's schedule of one-way pushes, and
//! a chat that fails must not take the desktop notifications down with it. Run it beside
//! the notifier (a user unit of its own).
//!
//! This module owns the engine: which request shows in which message, the digest a burst
//! becomes, who may tap, the integrity of every tap (`seal`), and what survives a restart
//! (`state`). `card` is one request's message and buttons, `platform` the interface of a chat
//! platform, `telegram` the Telegram Bot API, `slack` Slack's Socket Mode and Web API.

mod card;
mod platform;
mod seal;
mod slack;
mod state;
mod telegram;
mod text;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use askbus::client::{ClientError, UiAnswerer, UiEvent, UiSubscription, Update};
use askbus::protocol::{Code, ErrorCode, SubscribeFilter, WithdrawReason};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::context::FilterArgs;
use crate::term;
use card::{Block, Button, Card, Step, User, View};
use platform::{In, Msg, Out, DIGEST_KEY};
use seal::{Handle, Sealer};
use state::{SavedMessage, StateFile};

/// At most this many requests have a message of their own by default; more wait in one
/// digest message and get theirs as the others end.
const DEFAULT_MAX_MESSAGES: usize = 10;
/// The digest is edited at most this often.
const DIGEST_EVERY: Duration = Duration::from_secs(2);
/// The state file is written at most this often.
const SAVE_EVERY: Duration = Duration::from_millis(200);
/// How long after a reconnect the replay may take before what it did not bring is ended.
const REPLAY_GRACE: Duration = Duration::from_secs(5);
/// Lines a digest lists.
const DIGEST_LINES: usize = 10;

/// `askbus chat`'s command line.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(subcommand)]
    pub platform: PlatformArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlatformArgs {
    /// Telegram, by Bot API long polling: the bot's token from $ASKBUS_TELEGRAM_TOKEN or
    /// --token-file
    Telegram(TelegramArgs),
    /// Slack, by Socket Mode: the app-level token (xapp-…) from $ASKBUS_SLACK_APP_TOKEN or
    /// --app-token-file, the bot token (xoxb-…) from $ASKBUS_SLACK_BOT_TOKEN or
    /// --bot-token-file
    Slack(SlackArgs),
}

/// What every platform takes.
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// A chat user who may answer (the platform's user id: Telegram's are numbers, Slack's
    /// look like U0123ABCD); repeat for several.
    /// Taps and replies of anyone else are refused and logged
    #[arg(long = "allow-user", value_name = "USER_ID", required = true)]
    pub allow_users: Vec<String>,
    /// The platform's API base URL: for tests and self-hosted gateways (e.g. a local Bot API
    /// server) only [default: the platform's public API]
    #[arg(long, value_name = "URL")]
    pub api_base: Option<String>,
    /// Where message ids and the cursor are kept across restarts (0600) [default:
    /// $XDG_STATE_HOME/askbus/chat-PLATFORM-CHAT.json]; the button key is beside it (.key)
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Post only "an agent in project P needs you" (with a link to askbus web when
    /// --web-url is given): no question text, command or option leaves the machine
    #[arg(long)]
    pub redact: bool,
    /// Where `askbus web` is reached: messages link to the request there (signed links)
    #[arg(long, value_name = "BASE_URL")]
    pub web_url: Option<String>,
    /// The key that signs those links [default: web-links.key beside the socket]
    #[arg(long, value_name = "FILE")]
    pub link_key: Option<PathBuf>,
    /// At most this many requests get a message of their own; the others wait in one digest
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_MESSAGES)]
    pub max_messages: usize,
}

#[derive(Debug, clap::Args)]
pub struct TelegramArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The chat to post in: a user's id (a private chat with the bot) or a group's
    #[arg(long, value_name = "CHAT_ID")]
    pub chat: String,
    /// A file (mode 0600) holding the bot token, when $ASKBUS_TELEGRAM_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds a getUpdates long poll waits
    #[arg(long, value_name = "SECS", default_value_t = 30, hide = true)]
    pub poll_timeout: u64,
}

#[derive(Debug, clap::Args)]
pub struct SlackArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Where to post: a channel id (C…, the app invited to it) or a user id (U…, a direct
    /// message from the app)
    #[arg(long, value_name = "CHANNEL_ID")]
    pub channel: String,
    /// A file (mode 0600) holding the app-level token, when $ASKBUS_SLACK_APP_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub app_token_file: Option<PathBuf>,
    /// A file (mode 0600) holding the bot token, when $ASKBUS_SLACK_BOT_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub bot_token_file: Option<PathBuf>,
}

/// A token read from `env` or `file`, refused when it has characters no token has (it goes
/// into an HTTP header or a URL).
fn token(env: &str, file: Option<&Path>, flag: &str) -> Result<String> {
    let token = crate::notify::secret(env, file)?
        .with_context(|| format!("no token: set ${env} or give {flag}"))?;
    if token.is_empty()
        || !token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.'))
    {
        bail!("the token in ${env} (or {flag}) has characters a token never has");
    }
    Ok(token)
}

pub async fn run(socket: &Path, args: ChatArgs) -> Result<ExitCode> {
    let engine = match args.platform {
        PlatformArgs::Telegram(t) => {
            let token = crate::notify::secret("ASKBUS_TELEGRAM_TOKEN", t.token_file.as_deref())?
                .context("no bot token: set $ASKBUS_TELEGRAM_TOKEN or give --token-file")?;
            if !token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '_' || c == '-')
            {
                bail!("the Telegram token has characters a token never has");
            }
            if t.chat.parse::<i64>().is_err() && !t.chat.starts_with('@') {
                bail!("--chat takes a numeric chat id (or @channelname)");
            }
            let state_path = state_path(&t.common, "telegram", &t.chat)?;
            let state = StateFile::load(&state_path)?;
            let cfg = telegram::Config {
                api_base: t
                    .common
                    .api_base
                    .clone()
                    .unwrap_or_else(|| telegram::DEFAULT_API_BASE.into()),
                token,
                chat: t.chat.clone(),
                poll_secs: t.poll_timeout,
                cursor: state.saved.cursor,
            };
            let (out, rx) = telegram::spawn(cfg);
            Engine::new(socket, "telegram", t.common, state, &state_path, out, rx)?
        }
        PlatformArgs::Slack(s) => {
            let app_token = token(
                "ASKBUS_SLACK_APP_TOKEN",
                s.app_token_file.as_deref(),
                "--app-token-file",
            )?;
            let bot_token = token(
                "ASKBUS_SLACK_BOT_TOKEN",
                s.bot_token_file.as_deref(),
                "--bot-token-file",
            )?;
            if !app_token.starts_with("xapp-") {
                bail!(
                    "the app-level token starts with xapp- (Basic Information, App-Level Tokens)"
                );
            }
            if !bot_token.starts_with("xoxb-") {
                bail!("the bot token starts with xoxb- (OAuth & Permissions)");
            }
            if s.channel.is_empty() || !s.channel.chars().all(|c| c.is_ascii_alphanumeric()) {
                bail!("--channel takes a channel or user id (C0123ABCD, U0123ABCD)");
            }
            let state_path = state_path(&s.common, "slack", &s.channel)?;
            let state = StateFile::load(&state_path)?;
            let cfg = slack::Config {
                api_base: s
                    .common
                    .api_base
                    .clone()
                    .unwrap_or_else(|| slack::DEFAULT_API_BASE.into()),
                app_token,
                bot_token,
                channel: s.channel.clone(),
            };
            let (out, rx) = slack::spawn(cfg);
            Engine::new(socket, "slack", s.common, state, &state_path, out, rx)?
        }
    };
    let mut term_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut engine = engine;
    let result = tokio::select! {
        r = engine.run(socket) => r,
        _ = term_sig.recv() => Ok(ExitCode::SUCCESS),
        _ = int_sig.recv() => Ok(ExitCode::SUCCESS),
    };
    if let Err(e) = engine.state.save() {
        eprintln!("askbus chat: {e:#}");
    }
    result
}

fn state_path(common: &CommonArgs, platform: &str, chat: &str) -> Result<PathBuf> {
    if let Some(p) = &common.state {
        return Ok(p.clone());
    }
    let dir = state::default_dir().context("no $HOME: give --state")?;
    let chat: String = chat
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(dir.join(format!("chat-{platform}-{chat}.json")))
}

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
}

/// The signed-link maker, when `--web-url` is given.
struct Links {
    base: String,
    key: crate::links::LinkKey,
}

struct Engine {
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
    queued: BTreeSet<(u64, String)>,
    live: usize,
    digest_msg: Option<Msg>,
    digest_posting: bool,
    digest_dirty: bool,
    digest_after: Option<Instant>,
    state: StateFile,
    save_at: Option<Instant>,
    answerer: Option<UiAnswerer>,
    seq: u64,
    generation: u64,
    replay_left: u64,
    sweep_at: Option<Instant>,
}

impl Engine {
    fn new(
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

    async fn run(&mut self, socket: &Path) -> Result<ExitCode> {
        let mut sub = UiSubscription::new(socket, Some(&self.client))
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
                            eprintln!("askbus chat: {}; retrying in {}", term::sanitize(&down_text(error)), crate::duration::short(retry_in));
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
                _ = sleep_until(wake) => self.tick(),
            }
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        let digest = if self.digest_dirty && !self.digest_posting {
            Some(self.digest_after.unwrap_or_else(Instant::now))
        } else {
            None
        };
        [digest, self.save_at, self.sweep_at]
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
        };
        self.by_handle.insert(handle, id.clone());
        match saved {
            // Posted before a restart: that message is this request's; no new post.
            Some(m) => {
                entry.msg = Some(m.msg.clone());
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
        if !e.live {
            e.live = true;
            self.live += 1;
        }
        self.by_seq.insert(e.seq, id.to_owned());
        let key = e.seq.to_string();
        self.send(Out::Post { key, view });
    }

    fn redraw(&mut self, id: &str) {
        let Some(e) = self.entries.get(id) else {
            return;
        };
        let Some(msg) = e.msg.clone() else { return };
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

    async fn platform(&mut self, event: In) {
        match event {
            In::Posted { key, msg } if key == DIGEST_KEY => {
                self.digest_posting = false;
                self.digest_msg = Some(msg.clone());
                self.state.saved.digest = Some(msg);
                self.digest_dirty = true;
                self.dirty();
            }
            In::Posted { key, msg } => {
                let Ok(seq) = key.parse::<u64>() else { return };
                if let Some(mut card) = self.limbo.remove(&seq) {
                    let view = if self.redact {
                        card.redacted()
                    } else {
                        card.view()
                    };
                    card.version = card.version.wrapping_add(1);
                    self.send(Out::Edit {
                        msg,
                        view: View::<()>::clone_over(view),
                    });
                    return;
                }
                let Some(id) = self.by_seq.get(&seq).cloned() else {
                    return;
                };
                let Some(e) = self.entries.get_mut(&id) else {
                    return;
                };
                e.posting = false;
                e.msg = Some(msg.clone());
                let saved = SavedMessage {
                    digest: e.digest.clone(),
                    msg: msg.clone(),
                    version: e.card.version,
                };
                let changed = e.card.version != 0;
                let prompt = e.prompt.take().map(|tap| Out::Prompt {
                    key: e.seq.to_string(),
                    reply_to: msg.clone(),
                    text: e.card.prompt_text(),
                    tap,
                });
                self.by_msg.insert(msg, id.clone());
                self.state.saved.messages.insert(id.clone(), saved);
                self.dirty();
                if changed {
                    self.redraw(&id);
                }
                if let Some(p) = prompt {
                    self.send(p);
                }
            }
            In::Prompted { key, msg } => {
                if let Some(id) = key.parse::<u64>().ok().and_then(|s| self.by_seq.get(&s)) {
                    let id = id.clone();
                    self.by_msg.insert(msg, id);
                }
            }
            In::Failed { key, error } => {
                eprintln!("askbus chat: cannot post: {}", term::sanitize(&error));
                if key == DIGEST_KEY {
                    self.digest_posting = false;
                    return;
                }
                let Ok(seq) = key.parse::<u64>() else { return };
                self.limbo.remove(&seq);
                let Some(id) = self.by_seq.remove(&seq) else {
                    return;
                };
                if let Some(e) = self.entries.get_mut(&id) {
                    // It waits in the digest for a slot again.
                    e.posting = false;
                    if e.live {
                        e.live = false;
                        self.live -= 1;
                    }
                    self.queued.insert((seq, id));
                    self.digest_dirty = true;
                }
            }
            In::Tap {
                cursor,
                reply,
                user,
                data,
                msg,
            } => {
                if !self.fresh(cursor) {
                    return;
                }
                self.tap(reply, user, &data, msg).await;
            }
            In::Reply {
                cursor,
                user,
                reply_to,
                text,
            } => {
                if !self.fresh(cursor) {
                    return;
                }
                self.reply(user, reply_to, &text).await;
            }
            In::Fatal(_) => {}
        }
    }

    /// Whether an event is new: at or below the saved cursor it was handled already (a
    /// redelivery after a dropped connection or a restart), and applying it again is refused.
    fn fresh(&mut self, cursor: Option<u64>) -> bool {
        let Some(c) = cursor else { return true };
        if self.state.saved.cursor.is_some_and(|done| c <= done) {
            eprintln!("askbus chat: refused a redelivered update {c} (handled already)");
            return false;
        }
        self.state.saved.cursor = Some(c);
        self.dirty();
        true
    }

    fn toast(&self, reply: &str, text: &str, alert: bool) {
        self.send(Out::Toast {
            reply: reply.to_owned(),
            text: text.to_owned(),
            alert,
        });
    }

    async fn tap(&mut self, reply: String, user: User, data: &str, msg: Option<Msg>) {
        let who = term::sanitize(&user.label()).into_owned();
        if !self.allowed.contains(&user.id) {
            eprintln!("askbus chat: refused a tap by {who}: not an allowed user");
            self.toast(
                &reply,
                "You are not allowed to answer these requests.",
                true,
            );
            return;
        }
        let Some(opened) = Sealer::open(data) else {
            eprintln!("askbus chat: refused a tap by {who}: forged callback data");
            self.toast(&reply, "This button is not valid.", true);
            return;
        };
        let Some(id) = self.by_handle.get(&opened.handle).cloned() else {
            eprintln!("askbus chat: refused a tap by {who}: no pending request has that button (over, or forged)");
            self.toast(&reply, "This request is over.", false);
            return;
        };
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        if !self.sealer.verify(&id, &e.digest, &opened) {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: forged callback data",
                term::sanitize(&id)
            );
            self.toast(&reply, "This button is not valid.", true);
            return;
        }
        if opened.version != e.card.version {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: replayed or stale (version {} of {})",
                term::sanitize(&id),
                opened.version,
                e.card.version
            );
            self.toast(
                &reply,
                "This message has changed: use its current buttons.",
                false,
            );
            return;
        }
        // (A tap can beat our own `Posted`, the platform showing the message before its
        // reply reaches us: the seal binds the request either way.)
        if msg
            .as_ref()
            .is_some_and(|m| e.msg.as_ref().is_some_and(|ours| ours != m))
        {
            eprintln!(
                "askbus chat: refused a tap by {who} on {}: the button is not on that request's message",
                term::sanitize(&id)
            );
            self.toast(&reply, "This button is not valid.", true);
            return;
        }
        let Some(action) = card::Action::decode(opened.action, opened.arg) else {
            self.toast(&reply, "This button is not valid.", true);
            return;
        };
        let step = e.card.tap(action, &user);
        self.apply(&id, step, Some(reply), &user).await;
    }

    async fn reply(&mut self, user: User, reply_to: Option<Msg>, text: &str) {
        let Some(id) = reply_to.and_then(|m| self.by_msg.get(&m).cloned()) else {
            return;
        };
        let who = term::sanitize(&user.label()).into_owned();
        if !self.allowed.contains(&user.id) {
            eprintln!(
                "askbus chat: refused a reply by {who} to {}: not an allowed user",
                term::sanitize(&id)
            );
            return;
        }
        let Some(e) = self.entries.get_mut(&id) else {
            return;
        };
        let step = e.card.reply(text, &user);
        self.apply(&id, step, None, &user).await;
    }

    async fn apply(&mut self, id: &str, step: Step, reply: Option<String>, user: &User) {
        let ack = |this: &Self, text: &str, alert: bool| {
            if let Some(r) = &reply {
                this.toast(r, text, alert);
            }
        };
        match step {
            Step::Refuse(why) => ack(self, why, false),
            Step::Redraw => {
                ack(self, "", false);
                self.redraw(id);
            }
            Step::Prompt(_) => {
                self.redraw(id);
                let Some(e) = self.entries.get(id) else {
                    return;
                };
                match e.msg.clone() {
                    // The tap is acknowledged by the prompt itself (a modal must answer it).
                    Some(msg) => {
                        let text = e.card.prompt_text();
                        self.send(Out::Prompt {
                            key: e.seq.to_string(),
                            reply_to: msg,
                            text,
                            tap: reply,
                        });
                    }
                    None => {
                        if let Some(e) = self.entries.get_mut(id) {
                            e.prompt = Some(reply);
                        }
                    }
                }
            }
            Step::Answer(answers) => {
                let sent = match &self.answerer {
                    Some(a) => a
                        .answer_by(id, &answers, &user.label())
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err("askbusd is not reachable".into()),
                };
                self.sent(id, sent, reply.as_deref(), user);
            }
            Step::Decide(decision) => {
                let sent = match &self.answerer {
                    Some(a) => a
                        .decide_by(id, &decision, &user.label())
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err("askbusd is not reachable".into()),
                };
                self.sent(id, sent, reply.as_deref(), user);
            }
        }
    }

    fn sent(&mut self, id: &str, sent: Result<(), String>, reply: Option<&str>, user: &User) {
        match sent {
            Ok(()) => {
                eprintln!(
                    "askbus chat: {} answered {} in {}",
                    term::sanitize(&user.label()),
                    term::sanitize(id),
                    self.via
                );
                if let Some(r) = reply {
                    self.toast(r, "", false);
                }
            }
            Err(e) => {
                if let Some(r) = reply {
                    self.toast(r, "askbusd is not reachable: try again in a moment.", true);
                }
                eprintln!("askbus chat: cannot send an answer: {}", term::sanitize(&e));
                if let Some(e) = self.entries.get_mut(id) {
                    e.card.reopen();
                }
            }
        }
        self.redraw(id);
    }
}

impl View<()> {
    /// An outcome view: it has no taps, so it needs no seal.
    fn clone_over(view: View<card::Action>) -> View<String> {
        view.map(|_| String::new())
    }
}

fn withdrawn_text(reason: WithdrawReason) -> &'static str {
    match reason {
        WithdrawReason::Answered => "Answered elsewhere.",
        WithdrawReason::Timeout => "⌛ Timed out: nobody answered in time.",
        WithdrawReason::Withdrawn => "Withdrawn by the agent.",
        WithdrawReason::ProducerGone => "The agent went away.",
        WithdrawReason::Shutdown => "askbusd shut down.",
    }
}

fn title_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn down_text(error: ClientError) -> String {
    match error {
        ClientError::Closed => "askbusd closed the connection".to_owned(),
        e => crate::fail::describe(&e.into()).0,
    }
}
