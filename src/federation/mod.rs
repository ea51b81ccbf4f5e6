//! Federation over NATS JetStream: this node's link to the other askbusd nodes. It owns the
//! NATS connection (async-nats), the `P_pending` and `P_nodes` KV buckets and the
//! `P.answer.<node>` subject (layout in proto/PROTOCOL.md, "Federation"). The broker stays
//! pure: it hands what must cross NATS to this task through a bounded queue (`FedLink`), and
//! this task feeds what arrives back in as broker operations through the hub. A remote node is
//! one more kind of peer: its questions are pending requests with an origin, its UIs' answers
//! are answers decided by the broker like a local UI's. `answers` carries answers between
//! a UI's node and the origin; `watched` reads what the other nodes share; `wire` is the JSON
//! that crosses NATS.

mod answers;
pub mod config;
pub mod link;
mod watched;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use config::{FederationConfig, FederationError, ShareUsers};
pub use link::{unreachable, FedLink, FedStatus};
use wire::{AnswerReply, Entry, NodeBeat};

use crate::broker::{Acked, FedOut, Forward, RemoteQuestion, SharedEnd, SharedQuestion};
use crate::hub::Hub;
use crate::protocol::{ErrorCode, FrameError, WithdrawReason};

/// Room in the queue kept for shares and ends: a UI's answer to a remote question is refused
/// at once ("queue full") when fewer than this many slots would be left after it.
const SHARES_ROOM: usize = 8192;

/// How long the end of a question stays in the bucket (for nodes that reconnect).
const ENDED_TTL: Duration = Duration::from_secs(600);

/// Slack on a question's entry TTL beyond its deadline.
const ENTRY_SLACK: Duration = Duration::from_secs(5);

/// Starts federating `hub` as `cfg` says; the task runs until `stop`, then tells the other
/// nodes what ended meanwhile and leaves.
pub async fn start(
    cfg: FederationConfig,
    hub: Arc<Hub>,
    stop: CancellationToken,
) -> Result<(Arc<FedStatus>, tokio::task::JoinHandle<()>), FederationError> {
    let status = Arc::new(FedStatus {
        node: cfg.node.clone(),
        ..FedStatus::default()
    });
    // Room for every question the limits let be pending (each share is one operation, a
    // burst of asks is a burst of them), so a burst the daemon accepts is never dropped into a
    // resync, which republishes everything. The channel allocates as it fills.
    let (tx, rx) = mpsc::channel(hub.limits().max_pending_total.max(1) + SHARES_ROOM);
    let resync = Arc::new(AtomicBool::new(false));
    hub.federate(
        cfg.policy(),
        FedLink::new(tx, SHARES_ROOM, resync.clone(), status.clone()),
    );
    let options = cfg.connect_options().await?;
    for warning in cfg.transport_warnings() {
        tracing::warn!("federation: {warning}");
    }
    let task = Task {
        prefix: cfg.prefix.clone(),
        node: cfg.node.clone(),
        heartbeat: cfg.heartbeat,
        node_timeout: cfg.node_timeout,
        answer_timeout: cfg.answer_timeout,
        max_frame_bytes: cfg.max_frame_bytes,
        hub,
        status: status.clone(),
        resync,
        started_ms: unix_ms(SystemTime::now()),
    };
    let servers = cfg.servers.clone();
    let handle = tokio::spawn(async move { task.run(options, servers, rx, stop).await });
    Ok((status, handle))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Task {
    prefix: String,
    node: String,
    heartbeat: Duration,
    node_timeout: Duration,
    answer_timeout: Duration,
    /// A remote question's entry larger than a local frame may be is refused.
    max_frame_bytes: usize,
    hub: Arc<Hub>,
    status: Arc<FedStatus>,
    resync: Arc<AtomicBool>,
    started_ms: u64,
}

/// What the session's watches yield.
enum Watched {
    /// An entry of the nodes bucket: a beat, or a node gone.
    Node(Result<kv::Entry, kv::WatcherError>),
    /// An entry of one other node's questions.
    Question(Result<kv::Entry, kv::WatcherError>),
    /// A node's question watch ended; unless it was stopped on purpose (its token cancelled),
    /// the session starts over.
    Ended(Arc<str>, CancellationToken),
}

/// What one connection to NATS set up: the nodes bucket's watch, and one watch of the pending
/// bucket per other node alive (`<node>.>`), so a node never receives its own questions back
/// and a node's questions are read only once it is known to be alive.
struct Session {
    pending: kv::Store,
    nodes: futures_util::stream::BoxStream<'static, Result<kv::Entry, kv::WatcherError>>,
    questions: futures_util::stream::SelectAll<futures_util::stream::BoxStream<'static, Watched>>,
    /// The question watches, by node: cancelling one stops it.
    watching: HashMap<Arc<str>, CancellationToken>,
}

impl Session {
    /// Starts watching `node`'s questions (with their history: the ones pending now first).
    async fn watch(&mut self, node: &str) -> Result<(), async_nats::Error> {
        if self.watching.contains_key(node) {
            return Ok(());
        }
        let watch = self.pending.watch_with_history(format!("{node}.>")).await?;
        let node: Arc<str> = Arc::from(node);
        let stop = CancellationToken::new();
        let end = (node.clone(), stop.clone());
        self.questions.push(
            watch
                .map(Watched::Question)
                .take_until(stop.clone().cancelled_owned())
                .chain(futures_util::stream::once(async move {
                    Watched::Ended(end.0, end.1)
                }))
                .boxed(),
        );
        self.watching.insert(node, stop);
        Ok(())
    }

    /// Stops watching `node`'s questions.
    fn unwatch(&mut self, node: &str) {
        if let Some(stop) = self.watching.remove(node) {
            stop.cancel();
        }
    }
}

/// Other nodes as this one knows them: heard from, and when.
#[derive(Default)]
struct Presence {
    alive: HashMap<String, Instant>,
}

impl Task {
    fn pending_bucket(&self) -> String {
        format!("{}_pending", self.prefix)
    }

    fn nodes_bucket(&self) -> String {
        format!("{}_nodes", self.prefix)
    }

    /// Where this node sends its UIs' answers to `origin`'s questions: the subject names
    /// the sender, and the server lets a node publish only subjects carrying its own name.
    fn answer_subject(&self, origin: &str) -> String {
        format!("{}.answer.{origin}.{}", self.prefix, self.node)
    }

    /// Where this node takes answers: `P.answer.<node>.<sender>` for any sender.
    fn answers_wildcard(&self) -> String {
        format!("{}.answer.{}.*", self.prefix, self.node)
    }

    async fn run(
        self,
        options: async_nats::ConnectOptions,
        servers: Vec<String>,
        mut rx: mpsc::Receiver<Vec<FedOut>>,
        stop: CancellationToken,
    ) {
        let this = Arc::new(self);
        let (ev_tx, mut ev_rx) = mpsc::channel::<async_nats::Event>(256);
        let (perm_tx, _) = broadcast::channel::<String>(64);
        let options = {
            let perm_tx = perm_tx.clone();
            options.event_callback(move |event| {
                let ev_tx = ev_tx.clone();
                let perm_tx = perm_tx.clone();
                async move {
                    if let async_nats::Event::ServerError(async_nats::ServerError::Other(msg)) =
                        &event
                    {
                        let _ = perm_tx.send(msg.clone());
                    }
                    let _ = ev_tx.try_send(event);
                }
            })
        };
        let client = match options.connect(servers.clone()).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, servers = ?servers, "federation: cannot connect to NATS");
                return;
            }
        };
        let js = jetstream::new(client.clone());
        let mut answers = match client.subscribe(this.answers_wildcard()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "federation: cannot subscribe to the answer subject");
                return;
            }
        };
        let mut session: Option<Session> = None;
        let mut presence = Presence::default();
        let mut ended_offline: HashMap<String, SharedEnd> = HashMap::new();
        let mut heartbeat = tokio::time::interval(this.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut need_setup = client.connection_state() == async_nats::connection::State::Connected;
        loop {
            if need_setup {
                need_setup = false;
                match this.setup(&js, &mut presence, &mut ended_offline).await {
                    Ok(s) => {
                        session = Some(s);
                        this.status.connected.store(true, Ordering::Relaxed);
                        tracing::info!(node = %this.node, "federation: connected to NATS");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "federation: setting up JetStream failed; retrying");
                        session = None;
                        // Retried on the next heartbeat tick.
                    }
                }
            }
            let connected = this.status.connected();
            let next_expiry = presence
                .alive
                .values()
                .min()
                .map(|t| *t + this.node_timeout);
            let judging = connected && session.is_some();
            let expiry = async {
                match (judging, next_expiry) {
                    (true, Some(at)) => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                ev = ev_rx.recv() => match ev {
                    Some(async_nats::Event::Connected) if !this.status.connected() || session.is_none() => {
                        need_setup = true;
                    }
                    Some(async_nats::Event::Disconnected) => {
                        this.status.connected.store(false, Ordering::Relaxed);
                        this.status.reconnects.fetch_add(1, Ordering::Relaxed);
                        session = None;
                        tracing::warn!("federation: disconnected from NATS; the local bus carries on");
                    }
                    Some(other) => tracing::debug!(event = %other, "federation: NATS event"),
                    None => {}
                },
                outs = rx.recv() => {
                    let Some(outs) = outs else { break };
                    for out in outs {
                        this.handle_out(out, &js, &client, session.is_some(), &perm_tx, &mut ended_offline).await;
                    }
                    if this.resync.swap(false, Ordering::Relaxed) && session.is_some() {
                        need_setup = true;
                    }
                }
                msg = answers.next() => {
                    let Some(msg) = msg else { break };
                    this.answer(&client, msg).await;
                }
                entry = next_entry(&mut session) => {
                    let failed = match entry {
                        Some(Watched::Question(Ok(e))) => { this.pending_entry(e, &presence); None }
                        Some(Watched::Node(Ok(e))) => {
                            let s = session.as_mut().expect("an entry comes from a session");
                            this.node_entry(e, &mut presence, s).await.err().map(|e| e.to_string())
                        }
                        Some(Watched::Question(Err(e)) | Watched::Node(Err(e))) => Some(e.to_string()),
                        Some(Watched::Ended(node, stop)) => (!stop.is_cancelled())
                            .then(|| format!("the watch of node {node}'s questions ended")),
                        None => Some("the nodes' watch ended".to_owned()),
                    };
                    if let Some(e) = failed {
                        tracing::warn!(error = %e, "federation: a watch failed; starting over");
                        session = None;
                        need_setup = this.status.connected();
                    }
                }
                _ = heartbeat.tick() => {
                    // A setup that failed (JetStream not ready yet, e.g. a cluster still
                    // electing its leader) is retried while the connection is up.
                    let up = client.connection_state() == async_nats::connection::State::Connected;
                    if session.is_none() && up {
                        need_setup = true;
                    }
                    if this.status.connected() {
                        let beat = this.clone();
                        let (js, client) = (js.clone(), client.clone());
                        tokio::spawn(async move { beat.beat(&js, &client).await });
                    }
                }
                _ = expiry => this.expire_nodes(&mut presence, session.as_mut()),
            }
        }
        // A clean stop: the ends the shutdown queued go out, then the other nodes drop this
        // one's questions at once.
        if this.status.connected() {
            while let Ok(outs) = rx.try_recv() {
                for out in outs {
                    if !matches!(out, FedOut::Forward(_)) {
                        this.handle_out(out, &js, &client, true, &perm_tx, &mut ended_offline)
                            .await;
                    }
                }
            }
            if let Ok(nodes) = js.get_key_value(this.nodes_bucket()).await {
                let _ = tokio::time::timeout(Duration::from_secs(1), nodes.purge(&this.node)).await;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), client.flush()).await;
        }
    }

    /// Buckets, watches, and the reconcile every (re)connect does: republish what is pending
    /// here, end what no longer is, drop remote questions the bucket no longer holds.
    async fn setup(
        &self,
        js: &jetstream::Context,
        presence: &mut Presence,
        ended_offline: &mut HashMap<String, SharedEnd>,
    ) -> Result<Session, async_nats::Error> {
        let pending = bucket(js, &self.pending_bucket(), Duration::from_secs(86_400)).await?;
        let nodes = bucket(js, &self.nodes_bucket(), Duration::from_secs(3_600)).await?;
        self.put_beat(js).await?;
        // Keys first: what the bucket holds now.
        let mut keys = HashSet::new();
        let mut listed = pending.keys().await?;
        while let Some(k) = listed.next().await {
            keys.insert(k?);
        }
        let mine = format!("{}.", self.node);
        let now = Instant::now();
        let shared = self.hub.run(|b, _, _| b.shared_questions(now));
        let shared_ids: HashSet<&str> = shared.iter().map(|q| &*q.id).collect();
        for key in keys.iter().filter(|k| k.starts_with(&mine)) {
            let Some(id) = wire::id_of_key(&key[mine.len()..]) else {
                continue;
            };
            if shared_ids.contains(id.as_str()) {
                continue;
            }
            let end = ended_offline.remove(&id).unwrap_or_else(|| SharedEnd {
                id: Arc::from(id.as_str()),
                reason: "producer-gone",
                answered_by: None,
                winner_peer: None,
            });
            // Only a question still in the bucket as pending needs its end written.
            if let Ok(Some(v)) = pending.get(key.clone()).await {
                if matches!(wire::parse_entry(&v), Some(Entry::Question { .. })) {
                    self.publish_end(js, &end).await;
                }
            }
        }
        ended_offline.clear();
        for q in &shared {
            self.publish_question(js, q).await;
        }
        // Remote questions shown here whose key is gone from the bucket ended while this node
        // was away (the ends themselves expired).
        let shown = self.hub.run(|b, _, _| b.remote_questions());
        for (origin, id) in shown {
            if !keys.contains(&wire::key(&origin, &id)) {
                self.hub.run(|b, now, fx| {
                    b.remote_end(&origin, &id, WithdrawReason::Withdrawn, None, None, now, fx)
                });
            }
        }
        // Presence is judged afresh from now: nobody was heard from while we were away.
        let now = Instant::now();
        for seen in presence.alive.values_mut() {
            *seen = now;
        }
        // The nodes' beats come first (with history): each alive node's questions are
        // watched from its first beat in this session.
        let nodes = nodes.watch_with_history(">").await?.boxed();
        Ok(Session {
            pending,
            nodes,
            questions: futures_util::stream::SelectAll::new(),
            watching: HashMap::new(),
        })
    }

    async fn put_beat(&self, js: &jetstream::Context) -> Result<(), async_nats::Error> {
        let beat = NodeBeat {
            v: 1,
            node: &self.node,
            server: crate::SERVER_NAME,
            heartbeat_ms: self.heartbeat.as_millis() as u64,
            started_ms: self.started_ms,
        };
        let ttl = self.node_timeout.max(Duration::from_secs(1));
        let ack = publish(
            js,
            format!("$KV.{}.{}", self.nodes_bucket(), self.node),
            serde_json::to_vec(&beat)?,
            ttl,
        )
        .await?;
        ack.await?;
        Ok(())
    }

    async fn beat(&self, js: &jetstream::Context, client: &async_nats::Client) {
        let t0 = std::time::Instant::now();
        if client.flush().await.is_ok() {
            self.status
                .rtt_us
                .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        if let Err(e) = self.put_beat(js).await {
            tracing::debug!(error = %e, "federation: heartbeat not written");
        }
    }

    async fn publish_question(&self, js: &jetstream::Context, q: &SharedQuestion) {
        let deadline_ms = unix_ms(SystemTime::now() + q.remaining);
        let entry = wire::question(&self.node, q, deadline_ms);
        let subject = format!(
            "$KV.{}.{}",
            self.pending_bucket(),
            wire::key(&self.node, &q.id)
        );
        let ttl = q.remaining + ENTRY_SLACK;
        if let Err(e) = put(js, subject, entry, ttl).await {
            tracing::warn!(error = %e, id = &*q.id, "federation: question not shared");
        }
    }

    async fn publish_end(&self, js: &jetstream::Context, end: &SharedEnd) {
        let entry = wire::ended(&self.node, end);
        let subject = format!(
            "$KV.{}.{}",
            self.pending_bucket(),
            wire::key(&self.node, &end.id)
        );
        if let Err(e) = put(js, subject, entry, ENDED_TTL).await {
            tracing::warn!(error = %e, id = &*end.id, "federation: end not shared");
        }
    }

    async fn handle_out(
        self: &Arc<Self>,
        out: FedOut,
        js: &jetstream::Context,
        client: &async_nats::Client,
        online: bool,
        perm_tx: &broadcast::Sender<String>,
        ended_offline: &mut HashMap<String, SharedEnd>,
    ) {
        match out {
            FedOut::Publish(q) => {
                if online {
                    ended_offline.remove(&*q.id);
                    self.publish_question(js, &q).await;
                }
                // Offline: the reconnect republishes every question still pending.
            }
            FedOut::Ended(end) => {
                if online {
                    self.publish_end(js, &end).await;
                } else {
                    ended_offline.insert(end.id.to_string(), end);
                }
            }
            FedOut::Forward(f) => {
                let id = f.response.correlation_id().to_owned();
                if !online {
                    self.status.forward_errors.fetch_add(1, Ordering::Relaxed);
                    let err = unreachable(&id, "this node is not connected to NATS");
                    let ui = f.ui;
                    self.hub.run(|b, _, fx| b.forwarded(ui, &id, Err(err), fx));
                    return;
                }
                let this = self.clone();
                let client = client.clone();
                let perm = perm_tx.subscribe();
                tokio::spawn(async move { this.forward(client, f, perm).await });
            }
        }
    }
}

/// The next entry of the session's watches (never, without a session; `None` when the nodes'
/// watch ends).
async fn next_entry(session: &mut Option<Session>) -> Option<Watched> {
    let Some(s) = session else {
        return std::future::pending().await;
    };
    tokio::select! {
        e = s.nodes.next() => e.map(Watched::Node),
        Some(e) = s.questions.next(), if !s.questions.is_empty() => Some(e),
    }
}

/// A KV bucket with per-message TTLs, created on first use.
async fn bucket(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
) -> Result<kv::Store, async_nats::Error> {
    match js.get_key_value(name).await {
        Ok(store) => Ok(store),
        Err(_) => Ok(js
            .create_key_value(kv::Config {
                bucket: name.to_owned(),
                history: 1,
                max_age,
                storage: jetstream::stream::StorageType::File,
                limit_markers: Some(Duration::from_secs(60)),
                ..Default::default()
            })
            .await?),
    }
}

/// A KV put with a per-message TTL (the KV API has none for a plain put).
async fn publish(
    js: &jetstream::Context,
    subject: String,
    payload: Vec<u8>,
    ttl: Duration,
) -> Result<jetstream::context::PublishAckFuture, async_nats::Error> {
    Ok(js
        .publish_with_headers(subject, ttl_header(ttl), payload.into())
        .await?)
}

/// A KV put with a per-message TTL, without asking for the server's ack: a question's share
/// and end are the busiest messages federation sends, and waiting on (or tracking) an ack per
/// message made them queue behind one another (and a shutdown with 10,000 pending wait on the
/// client's 5,000-ack window). A put the server refuses (no permission) still reaches the log
/// as a server error; one lost with the connection is redone by the reconnect's reconcile.
async fn put(
    js: &jetstream::Context,
    subject: String,
    payload: Vec<u8>,
    ttl: Duration,
) -> Result<(), async_nats::Error> {
    js.client()
        .publish_with_headers(subject, ttl_header(ttl), payload.into())
        .await?;
    Ok(())
}

/// The `Nats-TTL` header for `ttl`: whole seconds, rounded up (never shorter than asked).
fn ttl_header(ttl: Duration) -> async_nats::HeaderMap {
    let mut headers = async_nats::HeaderMap::new();
    let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    headers.insert("Nats-TTL", secs.max(1).to_string().as_str());
    headers
}

/// The answer a remote UI gets, as a reply (`Ok` = ack).
pub(crate) fn reply_of(decision: &Result<Acked, FrameError>) -> Value {
    match decision {
        Ok(Acked::Question(outcome)) => json!({ "outcome": outcome.as_str() }),
        Ok(Acked::Approval {
            reason,
            confirmed,
            outcome,
        }) => json!({
            "outcome": reason.as_str(),
            "approval": { "confirmed": confirmed, "outcome": outcome.as_str() },
        }),
        Err(e) => json!({ "error": { "code": e.code.as_str(), "message": e.message } }),
    }
}
