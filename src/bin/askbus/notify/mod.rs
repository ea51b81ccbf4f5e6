//! `askbus notify`: tells the person that an agent is waiting, on the desktop (freedesktop
//! notifications with one-click answers) and on a phone (ntfy, webhooks, Slack), and answers
//! through askbusd from a click like any UI. It is one more subscriber of the bus (with the
//! UIs' filter), so it composes with every other UI under first-answer-wins: a request
//! answered elsewhere, withdrawn or timed out closes its notification.
//!
//! This module owns the loop and the bookkeeping (what is waiting, which notification shows
//! what); `waiting` the text and buttons, `schedule` the timing, `desktop` and `push` the sinks.

mod config;
mod desktop;
mod push;
mod schedule;
pub mod waiting;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Result};
use askbusd::client::{ClientError, UiAnswerer, UiEvent, UiSubscription, Update};
use askbusd::protocol::{Code, Decision, ErrorCode, SubscribeFilter};
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
            answerer: None,
            reports: report::Reporter::default(),
            push_rx: Some(push_rx),
            signal_rx: Some(signal_rx),
        })
    }

    async fn run(mut self, socket: &Path) -> Result<ExitCode> {
        let mut sub = UiSubscription::new(socket, Some(CLIENT))
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
                            eprintln!("askbus notify: {}; retrying in {}", term::sanitize(&down_text(error)), crate::duration::short(retry_in));
                            was_down = true;
                        }
                    }
                    Err(e) => bail!("{e}"),
                },
                Some(signal) = signal_rx.recv() => self.signal(signal).await,
                Some(report) = push_rx.recv() => self.push_report(report),
                _ = sleep_until(wake) => self.tick().await,
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
            for p in &mut self.push {
                p.schedule.add(&w.id, seq, now);
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
        if self.entries.capacity() > 64 && self.entries.len() < self.entries.capacity() / 4 {
            self.entries.shrink_to_fit();
        }
        Some(entry)
    }

    async fn show_outcome(&mut self, nid: u32, title: &str, text: &str) {
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let note = Note {
            replaces: nid,
            summary: title,
            body: text,
            actions: &[],
            urgency: Urgency::Low,
            expire_ms: 5000,
        };
        match desk.show(&note).await {
            Ok(id) => {
                d.shown.remove(&nid);
                d.shown.insert(id, Shown::Done);
            }
            Err(e) => eprintln!(
                "askbus notify: cannot update a notification: {}",
                term::sanitize(&e.to_string())
            ),
        }
    }

    async fn signal(&mut self, signal: Signal) {
        let Some(d) = &mut self.desktop else { return };
        match signal {
            Signal::Closed { id } => match d.shown.remove(&id) {
                Some(Shown::One(rid)) => {
                    if let Some(e) = self.entries.get_mut(&rid) {
                        if e.nid == Some(id) {
                            e.nid = None;
                        }
                    }
                }
                Some(Shown::Summary) => {
                    d.summary = None;
                    d.in_summary.clear();
                }
                _ => {}
            },
            Signal::Action { id, key } => {
                let Some(shown) = d.shown.get(&id).cloned() else {
                    return;
                };
                match (shown, key.as_str()) {
                    (Shown::One(rid), k) if k.starts_with('a') => {
                        let Ok(i) = k[1..].parse::<usize>() else {
                            return;
                        };
                        self.click(id, &rid, i).await;
                    }
                    (Shown::One(rid), _) => self.open(id, Some(rid)).await,
                    (Shown::Summary, _) => {
                        let first = d.in_summary.iter().next().map(|(_, id)| id.clone());
                        self.open(id, first).await;
                    }
                    (Shown::Done, _) => {}
                }
            }
        }
    }

    /// A button was clicked: answer through askbusd; the ack (or the refusal) updates it.
    async fn click(&mut self, nid: u32, id: &str, choice: usize) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let Some(c) = entry.w.choices.get(choice).cloned() else {
            return;
        };
        let title = entry.w.title();
        let Some(answerer) = self.answerer.clone() else {
            self.show_outcome(nid, &title, "askbusd is not reachable; nothing was sent.")
                .await;
            return;
        };
        entry.clicked = Some(nid);
        let sent = match &c.answer {
            Answer::Question(answers) => answerer.answer(id, answers).await,
            Answer::Approval(outcome) => answerer.decide(id, &Decision::allow(*outcome)).await,
        };
        if let Err(e) = sent {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.clicked = None;
            }
            let text = format!("Not sent: {e}");
            self.show_outcome(nid, &title, &text).await;
        }
    }

    /// "Open": the question in `askbus web` through a single-use link, or how to answer it.
    async fn open(&mut self, nid: u32, id: Option<String>) {
        let url = match (&self.links, &id) {
            (Some(l), Some(id)) => self.open_link(l, id),
            _ => None,
        };
        if let Some(url) = url {
            if let Err(e) = open::that_detached(&url) {
                eprintln!("askbus notify: cannot open a browser: {e}");
            } else {
                return;
            }
        }
        let title = id
            .as_ref()
            .and_then(|id| self.entries.get(id))
            .map_or_else(|| "askbus".to_owned(), |e| e.w.title());
        let body = "Answer it in a terminal: askbus ui (or start askbus web and give askbus notify --web-url).";
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let is_summary = d.summary == Some(nid);
        let actions = open_actions();
        let note = Note {
            replaces: nid,
            summary: &title,
            body,
            actions: if is_summary { &actions } else { &[] },
            urgency: Urgency::Normal,
            expire_ms: 0,
        };
        if let Err(e) = desk.show(&note).await {
            eprintln!(
                "askbus notify: cannot update a notification: {}",
                term::sanitize(&e.to_string())
            );
        }
    }

    fn expiry(&self, id: &str) -> u64 {
        let left = self.entries.get(id).map_or(0, |e| e.w.timeout_ms / 1000);
        crate::links::now_unix() + left.clamp(60, 7 * 24 * 3600)
    }

    fn open_link(&self, l: &Links, id: &str) -> Option<String> {
        let link = crate::links::Link::open(id, self.expiry(id)).ok()?;
        Some(format!("{}/o/{}", l.base, l.key.sign(&link)))
    }

    fn answer_link(&self, l: &Links, id: &str, answer: &Answer) -> Option<String> {
        let link = crate::links::Link::answer(id, answer.link_body(), self.expiry(id)).ok()?;
        Some(format!("{}/a/{}", l.base, l.key.sign(&link)))
    }

    async fn flush_desktop(&mut self, now: Instant) {
        let Some(d) = &mut self.desktop else { return };
        let Some(desk) = &d.desktop else { return };
        let due = d.schedule.take_due(now);
        let mut overflow = due.batch;
        let open_singles = |d: &DesktopSink| {
            d.shown
                .values()
                .filter(|s| matches!(s, Shown::One(_)))
                .count()
        };
        for id in due.singles {
            let Some(e) = self.entries.get(&id) else {
                continue;
            };
            if e.nid.is_none() && open_singles(d) >= MAX_OPEN {
                overflow.push(id);
                continue;
            }
            let mut actions: Vec<(String, String)> =
                e.w.choices
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("a{i}"), c.label.clone()))
                    .collect();
            actions.extend(open_actions());
            let body = e.w.body.clone();
            let note = Note {
                replaces: e.nid.unwrap_or(0),
                summary: &e.w.title(),
                body: &body,
                actions: &actions,
                urgency: match e.w.kind {
                    Kind::Question => Urgency::Normal,
                    Kind::Approval => Urgency::Critical,
                },
                expire_ms: 0,
            };
            match desk.show(&note).await {
                Ok(nid) => {
                    if let Some(old) = e.nid.filter(|&o| o != nid) {
                        d.shown.remove(&old);
                    }
                    d.shown.insert(nid, Shown::One(id.clone()));
                    if let Some(e) = self.entries.get_mut(&id) {
                        e.nid = Some(nid);
                    }
                    self.reports.sent("desktop", &[id]);
                }
                Err(e) => {
                    self.reports.failed("desktop", &[id], &e.to_string());
                }
            }
        }
        for id in overflow {
            if let Some(e) = self.entries.get(&id) {
                if e.nid.is_none() {
                    d.in_summary.insert((e.seq, id));
                    d.summary_dirty = true;
                }
            }
        }
        if !d.summary_dirty {
            return;
        }
        d.summary_dirty = false;
        if d.in_summary.is_empty() {
            if let Some(nid) = d.summary.take() {
                d.shown.remove(&nid);
                let _ = desk.close(nid).await;
            }
            return;
        }
        let titles: Vec<String> = d
            .in_summary
            .iter()
            .take(3)
            .filter_map(|(_, id)| self.entries.get(id).map(|e| e.w.title()))
            .collect();
        let n = d.in_summary.len();
        let mut body = titles.join("\n");
        if n > titles.len() {
            body.push_str(&format!("\n…and {} more", n - titles.len()));
        }
        let title = format!("{n} requests are waiting");
        let actions = open_actions();
        let note = Note {
            replaces: d.summary.unwrap_or(0),
            summary: &title,
            body: &body,
            actions: &actions,
            urgency: Urgency::Normal,
            expire_ms: 0,
        };
        let ids: Vec<String> = d.in_summary.iter().map(|(_, id)| id.clone()).collect();
        match desk.show(&note).await {
            Ok(nid) => {
                if let Some(old) = d.summary.filter(|&o| o != nid) {
                    d.shown.remove(&old);
                }
                d.summary = Some(nid);
                d.shown.insert(nid, Shown::Summary);
                self.reports.sent("desktop", &ids);
            }
            Err(e) => self.reports.failed("desktop", &ids, &e.to_string()),
        }
    }

    fn flush_push(&mut self, now: Instant) {
        for i in 0..self.push.len() {
            let due = self.push[i].schedule.take_due(now);
            let mut batch = due.batch;
            for id in due.singles {
                let Some(msg) = self.single_message(&id) else {
                    continue;
                };
                if self.push[i].tx.try_send(msg).is_err() {
                    batch.push(id);
                }
            }
            if batch.is_empty() {
                continue;
            }
            let msg = self.batch_message(batch);
            if let Err(e) = self.push[i].tx.try_send(msg) {
                // The queue is full of retries: put them back, to go out in a later batch.
                let msg = match e {
                    mpsc::error::TrySendError::Full(m) | mpsc::error::TrySendError::Closed(m) => m,
                };
                let sink = self.push[i].sink;
                for id in &msg.ids {
                    if let Some(e) = self.entries.get(id) {
                        self.push[i].schedule.add(id, e.seq, now + WINDOW);
                    }
                }
                eprintln!(
                    "askbus notify: {sink}: {} pushes still queued; the next batch waits",
                    push::QUEUE
                );
            }
        }
    }

    fn single_message(&self, id: &str) -> Option<push::Message> {
        let e = self.entries.get(id)?;
        let w = &e.w;
        let mut actions = Vec::new();
        let mut click = None;
        if let Some(l) = &self.links {
            for c in w.push_choices(self.redact) {
                if let Some(url) = self.answer_link(l, id, &c.answer) {
                    actions.push(push::Action {
                        label: c.label.clone(),
                        url,
                        post: true,
                    });
                }
            }
            click = self.open_link(l, id);
            if let Some(url) = &click {
                actions.push(push::Action {
                    label: "Open".into(),
                    url: url.clone(),
                    post: false,
                });
            }
        }
        // ntfy shows three buttons: keep "Open" as the third when there are more.
        if actions.len() > 3 {
            let open = actions.pop();
            actions.truncate(2);
            actions.extend(open);
        }
        let (title, body) = if self.redact {
            ("askbus".to_owned(), w.redacted_body())
        } else {
            (w.title(), w.body.clone())
        };
        Some(push::Message {
            ids: vec![id.to_owned()],
            title,
            body,
            agent: w.agent.clone(),
            project: w.project.clone(),
            kind: match w.kind {
                Kind::Question => "question",
                Kind::Approval => "approval",
            },
            click,
            actions,
        })
    }

    fn batch_message(&self, ids: Vec<String>) -> push::Message {
        let mut agents: Vec<&str> = Vec::new();
        for id in &ids {
            if let Some(e) = self.entries.get(id) {
                if !agents.contains(&e.w.agent.as_str()) {
                    agents.push(&e.w.agent);
                }
            }
        }
        let title = format!("{} requests are waiting", ids.len());
        let shown: Vec<&str> = agents.iter().take(3).copied().collect();
        let mut body = format!("from {}", shown.join(", "));
        if agents.len() > shown.len() {
            body.push_str(&format!(" and {} more agents", agents.len() - shown.len()));
        }
        let click = self.links.as_ref().and_then(|l| self.open_link(l, &ids[0]));
        let actions = click
            .iter()
            .map(|url| push::Action {
                label: "Open".into(),
                url: url.clone(),
                post: false,
            })
            .collect();
        push::Message {
            agent: agents.first().map_or_else(String::new, |a| (*a).to_owned()),
            project: None,
            ids,
            title,
            body,
            kind: "batch",
            click,
            actions,
        }
    }

    fn push_report(&mut self, r: push::Report) {
        match r.outcome {
            push::Outcome::Sent { attempts } => {
                if attempts > 1 {
                    eprintln!("askbus notify: {} delivered on attempt {attempts}", r.sink);
                }
                self.reports.sent(r.sink, &r.ids)
            }
            push::Outcome::Failed { attempts, error } => {
                let text = format!("gave up after {attempts} attempts: {error}");
                self.reports.failed(r.sink, &r.ids, &text);
            }
            push::Outcome::Skipped => {}
        }
    }
}

fn open_actions() -> Vec<(String, String)> {
    vec![
        ("open".into(), "Open".into()),
        ("default".into(), "Open".into()),
    ]
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
