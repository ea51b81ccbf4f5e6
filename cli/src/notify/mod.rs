//! `askbus notify`: tells the person that an agent is waiting, on the desktop (freedesktop
//! notifications with one-click answers) and on a phone (ntfy, webhooks, Slack), and answers
//! through askbusd from a click like any UI. It is one more subscriber of the bus (with the
//! UIs' filter), so it composes with every other UI under first-answer-wins: a request
//! answered elsewhere, withdrawn or timed out closes its notification.
//!
//! This module owns the loop and the bookkeeping (what is waiting, which notification shows
//! what); `actions` what the desktop reports back, `deliver` what is shown when, `waiting`
//! the text and buttons, `schedule` the timing, `desktop` and `push` the sinks, `pushed` the
//! record of what was pushed that outlives the process.

mod actions;
mod config;
mod deliver;
mod desktop;
mod push;
mod pushed;
mod schedule;
pub mod waiting;

pub use config::secret;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Result};
use askbus::client::{UiAnswerer, UiEvent, UiSubscription, Update};
use askbus::protocol::{Code, Decision, ErrorCode, SubscribeFilter};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::context::FilterArgs;
use crate::term;
use desktop::{Desktop, Note, Signal, Urgency};
use schedule::Schedule;
use waiting::{Answer, Kind, Waiting};

const CLIENT: &str = concat!("askbus-notify/", env!("CARGO_PKG_VERSION"));
/// Flushes are at least this far apart: what falls due meanwhile goes out together.
const WINDOW: Duration = Duration::from_secs(1);
/// At most this many single desktop notifications are open at once; more go into one summary.
const MAX_OPEN: usize = 3;
/// The desktop action key of an approval's "Allow always" (its rule is in the body).
const ALWAYS_KEY: &str = "always";
/// More requests than this due at one flush are batched.
const MAX_SINGLE: usize = 3;
/// How long after a reconnect the replay may take before what it did not bring is dropped.
const REPLAY_GRACE: Duration = Duration::from_secs(5);
/// How often an unreachable session bus is tried again.
const DESKTOP_RETRY: Duration = Duration::from_secs(30);

/// `askbus notify`'s command line.
#[derive(Debug, clap::Args)]
pub struct NotifyArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// No desktop notifications (push only)
    #[arg(long)]
    pub no_desktop: bool,
    /// Push to this ntfy topic URL (https://ntfy.sh/TOPIC or your server's); the access
    /// token comes from $ASKBUS_NTFY_TOKEN or the config file's token-file
    #[arg(long, value_name = "TOPIC_URL")]
    pub ntfy: Option<String>,
    /// ntfy priority, 1 (min) to 5 (max) [default: 4]
    #[arg(long, value_name = "1-5")]
    pub priority: Option<u8>,
    /// POST a JSON message to this URL (bearer token from $ASKBUS_WEBHOOK_TOKEN); Slack's
    /// webhook URL is a secret: $ASKBUS_SLACK_WEBHOOK or the config file
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Notify once a request has waited this long [default: 0 on the desktop, 30s for pushes]
    #[arg(long, value_name = "DURATION")]
    pub after: Option<String>,
    /// The wait before a push, when it differs from --after
    #[arg(long, value_name = "DURATION")]
    pub push_after: Option<String>,
    /// Remind at this interval until the request ends [default: never]
    #[arg(long, value_name = "DURATION")]
    pub remind: Option<String>,
    /// Pushes say only "agent X is waiting": no question text, command or option leaves
    /// the machine
    #[arg(long)]
    pub redact: bool,
    /// Where `askbus web` is reached (from the phone too): buttons and links become signed,
    /// single-use links to it (BASE/a/TOKEN answers, BASE/o/TOKEN opens the question)
    #[arg(long, value_name = "BASE_URL")]
    pub web_url: Option<String>,
    /// The key that signs those links (the same file `askbus web --link-key` reads)
    /// [default: web-links.key beside the socket]
    #[arg(long, value_name = "FILE")]
    pub link_key: Option<PathBuf>,
    /// Settings file [default: $XDG_CONFIG_HOME/askbus/notify.toml, when it exists]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub async fn run(socket: &Path, args: NotifyArgs) -> Result<ExitCode> {
    let notifier = Notifier::new(socket, args)?;
    let mut term_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    tokio::select! {
        r = notifier.run(socket) => r,
        _ = term_sig.recv() => Ok(ExitCode::SUCCESS),
        _ = int_sig.recv() => Ok(ExitCode::SUCCESS),
    }
}

/// One waiting request.
struct Entry {
    w: Waiting,
    seq: u64,
    /// The connection generation that last brought it (a reconnect's replay renews it).
    generation: u64,
    /// Its own desktop notification, while one is open.
    nid: Option<u32>,
    /// The desktop notification whose button answered it, until the daemon confirms.
    clicked: Option<u32>,
}

/// What a desktop notification shows.
#[derive(Debug, Clone)]
enum Shown {
    One(String),
    Summary,
    /// An outcome ("answered from this notification"), left to expire.
    Done,
}

struct DesktopSink {
    desktop: Option<Desktop>,
    retry_at: Option<Instant>,
    schedule: Schedule,
    shown: HashMap<u32, Shown>,
    summary: Option<u32>,
    /// Requests told about in the summary rather than one by one, oldest first.
    in_summary: BTreeSet<(u64, String)>,
    summary_dirty: bool,
    signals: mpsc::UnboundedSender<Signal>,
}

struct PushSink {
    sink: &'static str,
    tx: mpsc::Sender<push::Message>,
    schedule: Schedule,
}

/// The signed-link maker, when `--web-url` is given.
struct Links {
    base: String,
    key: crate::links::LinkKey,
}

struct Notifier {
    filter: SubscribeFilter,
    redact: bool,
    entries: HashMap<String, Entry>,
    alive: push::Alive,
    seq: u64,
    generation: u64,
    replay_left: u64,
    sweep_at: Option<Instant>,
    last_flush: Option<Instant>,
    desktop: Option<DesktopSink>,
    push: Vec<PushSink>,
    links: Option<Links>,
    /// What was pushed, also by an earlier notifier process: not pushed again.
    pushed: pushed::Pushed,
    answerer: Option<UiAnswerer>,
    reports: report::Reporter,
    push_rx: Option<mpsc::UnboundedReceiver<push::Report>>,
    signal_rx: Option<mpsc::UnboundedReceiver<Signal>>,
}

mod report;

impl Notifier {
    fn new(socket: &Path, args: NotifyArgs) -> Result<Notifier> {
        let section = config::load(args.config.as_deref())?;
        let after = match args.after.as_deref().or(section.after.as_deref()) {
            Some(s) => Some(config::duration(s)?),
            None => None,
        };
        let push_after = match args.push_after.as_deref().or(section.push_after.as_deref()) {
            Some(s) => config::duration(s)?,
            None => after.unwrap_or(Duration::from_secs(30)),
        };
        let remind = match args.remind.as_deref().or(section.remind.as_deref()) {
            Some(s) => match config::duration(s)? {
                d if d.is_zero() => None,
                d if d < WINDOW => bail!("--remind must be at least 1s"),
                d => Some(d),
            },
            None => None,
        };
        let redact = args.redact || section.redact.unwrap_or(false);
        let targets = config::targets(
            &section,
            args.ntfy.as_deref(),
            args.webhook.as_deref(),
            args.priority,
        )?;
        let desktop_on = !args.no_desktop && section.desktop.unwrap_or(true);
        if !desktop_on && targets.is_empty() {
            bail!("nothing to notify: desktop notifications are off and no push target is set (--ntfy, --webhook, or the config file)");
        }
        let web_url = args.web_url.or(section.web_url);
        let links = match web_url {
            Some(base) => {
                if !(base.starts_with("http://") || base.starts_with("https://")) {
                    bail!("--web-url must start with https:// (or http://)");
                }
                let path = crate::links::key_path(
                    args.link_key.as_deref().or(section.link_key.as_deref()),
                    socket,
                );
                let key = crate::links::LinkKey::load_or_create(&path)?;
                Some(Links {
                    base: base.trim_end_matches('/').to_owned(),
                    key,
                })
            }
            None => None,
        };
        let alive: push::Alive = Arc::new(Mutex::new(HashSet::new()));
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let retry = config::retry();
        let push = targets
            .into_iter()
            .map(|t| PushSink {
                sink: t.sink(),
                tx: push::spawn(t, retry, alive.clone(), push_tx.clone()),
                schedule: Schedule::new(push_after, remind, MAX_SINGLE),
            })
            .collect();
        let (signal_tx, signal_rx) = mpsc::unbounded_channel();
        let desktop = desktop_on.then(|| DesktopSink {
            desktop: None,
            retry_at: Some(Instant::now()),
            schedule: Schedule::new(after.unwrap_or(Duration::ZERO), remind, MAX_SINGLE),
            shown: HashMap::new(),
            summary: None,
            in_summary: BTreeSet::new(),
            summary_dirty: false,
            signals: signal_tx,
        });
        Ok(Notifier {
            filter: args.filter.filter(),
            redact,
            entries: HashMap::new(),
            alive,
            seq: 0,
            generation: 0,
            replay_left: 0,
            sweep_at: None,
            last_flush: None,
            desktop,
            push,
            links,
            pushed: pushed::Pushed::load(socket),
            answerer: None,
            reports: report::Reporter::default(),
            push_rx: Some(push_rx),
            signal_rx: Some(signal_rx),
        })
    }

    async fn run(mut self, socket: &Path) -> Result<ExitCode> {
        let mut sub = UiSubscription::new(socket, Some(CLIENT))
            .via("notify")
            .filtered(self.filter.clone())
            .persistent();
        let mut push_rx = self.push_rx.take().expect("taken once");
        let mut signal_rx = self.signal_rx.take().expect("taken once");
        let mut was_down = false;
        loop {
            let wake = self.next_wake();
            tokio::select! {
                update = sub.next() => match update {
                    Ok(Update::Connected((pending, answerer))) => {
                        eprintln!("askbus notify: {} {}", if was_down { "back on" } else { "watching" }, socket.display());
                        was_down = false;
                        self.connected(pending, answerer).await;
                    }
                    Ok(Update::Event(event)) => self.event(event).await,
                    Ok(Update::Down { error, retry_in }) => {
                        self.answerer = None;
                        if !was_down {
                            eprintln!("askbus notify: {}; retrying in {}", term::sanitize(&crate::fail::connection_down(error)), crate::duration::short(retry_in));
                            was_down = true;
                        }
                    }
                    Err(e) => bail!("{e}"),
                },
                Some(signal) = signal_rx.recv() => self.signal(signal).await,
                Some(report) = push_rx.recv() => self.push_report(report),
                _ = crate::duration::sleep_until(wake) => self.tick().await,
            }
            if let (false, Some(ui)) = (self.reports.is_empty(), &self.answerer) {
                self.reports.flush(ui).await;
            }
        }
    }

    /// When the loop must next wake for the clock: a flush, a sweep, a bus retry.
    fn next_wake(&self) -> Option<Instant> {
        let mut due: Vec<Instant> = Vec::new();
        if let Some(d) = &self.desktop {
            if d.desktop.is_some() {
                due.extend(d.schedule.next_due());
                if d.summary_dirty {
                    due.push(Instant::now());
                }
            } else {
                due.extend(d.retry_at);
            }
        }
        for p in &self.push {
            due.extend(p.schedule.next_due());
        }
        let flush = due.into_iter().min();
        let flush = match (flush, self.last_flush) {
            (Some(f), Some(last)) => Some(f.max(last + WINDOW)),
            (f, _) => f,
        };
        [flush, self.sweep_at].into_iter().flatten().min()
    }

    async fn tick(&mut self) {
        let now = Instant::now();
        if self.sweep_at.is_some_and(|at| at <= now) {
            self.sweep().await;
        }
        if let Some(d) = &mut self.desktop {
            if d.desktop.is_none() && d.retry_at.is_some_and(|at| at <= now) {
                match Desktop::connect(d.signals.clone()).await {
                    Ok(desk) => {
                        if !desk.actions {
                            eprintln!("askbus notify: the notification server shows no buttons; clicking a notification opens the question");
                        }
                        d.desktop = Some(desk);
                        d.retry_at = None;
                    }
                    Err(e) => {
                        eprintln!(
                            "askbus notify: no desktop notifications yet ({}); trying again in {}",
                            term::sanitize(&e.to_string()),
                            crate::duration::short(DESKTOP_RETRY)
                        );
                        self.reports.failed("desktop", &[], &e.to_string());
                        d.retry_at = Some(now + DESKTOP_RETRY);
                    }
                }
            }
        }
        if self.last_flush.is_some_and(|l| now < l + WINDOW) {
            return;
        }
        self.last_flush = Some(now);
        self.flush_desktop(now).await;
        self.flush_push(now);
    }

    async fn connected(&mut self, pending: u64, answerer: UiAnswerer) {
        self.answerer = Some(answerer);
        self.generation += 1;
        self.replay_left = pending;
        if pending == 0 {
            self.sweep().await;
        } else {
            self.sweep_at = Some(Instant::now() + REPLAY_GRACE);
        }
    }

    /// After a reconnect's replay: what it did not bring ended while the bus was away.
    async fn sweep(&mut self) {
        self.sweep_at = None;
        let generation = self.generation;
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.generation < generation)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.ended(&id).await;
        }
        // What an earlier process pushed and no replay brought back has ended.
        let entries = &self.entries;
        self.pushed.retain(|id| entries.contains_key(id));
        self.pushed.save();
    }

    async fn event(&mut self, event: UiEvent) {
        match event {
            UiEvent::Request(r) => self.arrived(Waiting::from_question(&r)).await,
            UiEvent::Approval(a) => self.arrived(Waiting::from_approval(&a)).await,
            UiEvent::Withdrawn { correlation_id, .. }
            | UiEvent::ApprovalWithdrawn { correlation_id, .. } => {
                self.ended(&correlation_id).await
            }
            UiEvent::Ack { correlation_id, .. } => self.answered_here(&correlation_id).await,
            UiEvent::ApprovalAck(a) => self.answered_here(&a.correlation_id).await,
            UiEvent::Error(e) => {
                let Some(id) = e.correlation_id.as_deref() else {
                    eprintln!(
                        "askbus notify: askbusd: {}: {}",
                        e.code,
                        term::sanitize(&e.message)
                    );
                    return;
                };
                let Some(entry) = self.entries.get_mut(id) else {
                    return;
                };
                let Some(nid) = entry.clicked.take() else {
                    return;
                };
                let text = if e.code == Code::Known(ErrorCode::NotPending) {
                    "Already answered elsewhere.".to_owned()
                } else {
                    format!("askbusd refused the answer: {}", e.message)
                };
                let title = entry.w.title();
                self.show_outcome(nid, &title, &text).await;
            }
        }
    }

    async fn arrived(&mut self, w: Waiting) {
        self.replay_left = self.replay_left.saturating_sub(1);
        let generation = self.generation;
        if let Some(e) = self.entries.get_mut(&w.id) {
            e.generation = generation;
        } else {
            let now = Instant::now();
            self.seq += 1;
            let seq = self.seq;
            if let Some(d) = &mut self.desktop {
                d.schedule.add(&w.id, seq, now);
            }
            let told = self.pushed.contains(&w.id);
            for p in &mut self.push {
                if told {
                    p.schedule.add_told(&w.id, seq, now);
                } else {
                    p.schedule.add(&w.id, seq, now);
                }
            }
            self.alive
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(w.id.clone());
            self.entries.insert(
                w.id.clone(),
                Entry {
                    w,
                    seq,
                    generation,
                    nid: None,
                    clicked: None,
                },
            );
        }
        if self.replay_left == 0 && self.sweep_at.is_some() {
            self.sweep().await;
        }
    }

    /// The request ended elsewhere (or here, unconfirmed): close what shows it.
    async fn ended(&mut self, id: &str) {
        let Some(entry) = self.remove(id) else { return };
        if let (Some(nid), Some(d)) = (entry.nid, &mut self.desktop) {
            d.shown.remove(&nid);
            if let Some(desk) = &d.desktop {
                if let Err(e) = desk.close(nid).await {
                    eprintln!(
                        "askbus notify: cannot close a notification: {}",
                        term::sanitize(&e.to_string())
                    );
                }
            }
        }
    }

    /// This notifier's answer won.
    async fn answered_here(&mut self, id: &str) {
        let Some(entry) = self.remove(id) else { return };
        let Some(nid) = entry.clicked else { return };
        self.reports.answered(id);
        let text = match entry.w.kind {
            Kind::Question => "Answered from this notification.",
            Kind::Approval => "Decided from this notification.",
        };
        self.show_outcome(nid, &entry.w.title(), text).await;
    }

    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.entries.remove(id)?;
        self.alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(d) = &mut self.desktop {
            d.schedule.remove(id);
            if d.in_summary.remove(&(entry.seq, id.to_owned())) {
                d.summary_dirty = true;
            }
        }
        for p in &mut self.push {
            p.schedule.remove(id);
        }
        self.pushed.remove(id);
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
        }
        Some(entry)
    }
}

fn open_actions() -> Vec<(String, String)> {
    vec![
        ("open".into(), "Open".into()),
        ("default".into(), "Open".into()),
    ]
}
