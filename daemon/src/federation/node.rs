//! The federation task (the `federation` cargo feature): this node's NATS connection, what it
//! publishes and serves, and what it feeds back into the hub. `answers`, `peers`, `outgoing`,
//! `sync` and `wire` are its parts (see the module above).

mod answers;
mod outgoing;
mod peers;
mod sync;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{self, FederationConfig, FederationError};
use crate::hub::federation::{unreachable, FedLink, FedStatus};
use wire::AnswerReply;

use crate::broker::{FedOut, Forward, RemoteQuestion};
use crate::hub::Hub;
use crate::outbox::Batch;
use crate::protocol::{ErrorCode, FrameError, WithdrawReason};
use outgoing::{Outgoing, Queued};

/// Room in the queue kept for shares and ends: a UI's answer to a remote question is refused
/// at once ("queue full") when fewer than this many slots would be left after it.
const SHARES_ROOM: usize = 8192;

/// The most messages of one subscription handled in a row before the frames they made for
/// local peers are written: a burst (many questions in flight) costs one write per peer, and
/// the other subscriptions wait at most this many messages.
const BURST: usize = 64;

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
    // resync. The channel allocates as it fills.
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
        subjects: Subjects::new(&cfg.prefix, &cfg.node),
        prefix: cfg.prefix.clone(),
        node: cfg.node.clone(),
        heartbeat: cfg.heartbeat,
        node_timeout: cfg.node_timeout,
        answer_timeout: cfg.answer_timeout,
        max_frame_bytes: cfg.max_frame_bytes,
        accept: cfg.accept,
        offline_limit: hub.limits().max_pending_total.max(1) + SHARES_ROOM,
        hub,
        status: status.clone(),
        resync,
        epoch: unix_ms(SystemTime::now()),
    };
    let servers = cfg.servers.clone();
    let handle = tokio::spawn(async move { task.run(options, servers, rx, stop).await });
    Ok((status, handle))
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The subjects every message of this node names, made once (not per message).
struct Subjects {
    /// `P.q.`: a node's shares, ends and presence follow it.
    q_prefix: String,
    /// `P.q.<node>`: where this node publishes (a subject clones without copying).
    own_q: async_nats::Subject,
    /// `P.answer.<node>.*`: where this node takes answers.
    answers: String,
}

impl Subjects {
    fn new(prefix: &str, node: &str) -> Subjects {
        Subjects {
            q_prefix: format!("{prefix}.q."),
            own_q: format!("{prefix}.q.{node}").into(),
            answers: format!("{prefix}.answer.{node}.*"),
        }
    }
}

struct Task {
    subjects: Subjects,
    prefix: String,
    node: String,
    heartbeat: Duration,
    node_timeout: Duration,
    answer_timeout: Duration,
    /// A remote question's share larger than a local frame may be is refused.
    max_frame_bytes: usize,
    /// Whether this node shows remote questions at all: only then does it read `P.q.*`.
    accept: bool,
    /// How many shares and ends are kept while NATS is away before they are given up for a
    /// sequence hole (which makes every other node sync).
    offline_limit: usize,
    hub: Arc<Hub>,
    status: Arc<FedStatus>,
    resync: Arc<AtomicBool>,
    /// This run's epoch (its start, Unix ms): the other nodes tell a restart by it.
    epoch: u64,
}

impl Task {
    /// `P.q.<node>`: shares, ends and presence of `node`.
    fn q_subject(&self, node: &str) -> String {
        format!("{}.q.{node}", self.prefix)
    }

    /// Where this node sends its UIs' answers to `origin`'s questions: the subject names
    /// the sender, and the server lets a node publish only subjects carrying its own name.
    fn answer_subject(&self, origin: &str) -> String {
        format!("{}.answer.{origin}.{}", self.prefix, self.node)
    }

    /// Where this node takes answers: `P.answer.<node>.<sender>` for any sender.
    fn answers_wildcard(&self) -> String {
        self.subjects.answers.clone()
    }

    /// Where this node asks `origin` for its pending questions.
    fn sync_subject(&self, origin: &str) -> String {
        format!("{}.sync.{origin}.{}", self.prefix, self.node)
    }

    /// Where this node serves its pending questions: `P.sync.<node>.<asker>`.
    fn sync_wildcard(&self) -> String {
        format!("{}.sync.{}.*", self.prefix, self.node)
    }

    /// Where the other nodes' replies to this node's hello come: its own inbox.
    fn hello_inbox(&self) -> String {
        format!("{}.hello", config::inbox_prefix(&self.node))
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
            let servers = servers.clone();
            options.event_callback(move |event| {
                let ev_tx = ev_tx.clone();
                let perm_tx = perm_tx.clone();
                let servers = servers.clone();
                async move {
                    if let async_nats::Event::ServerError(async_nats::ServerError::Other(msg)) =
                        &event
                    {
                        let _ = perm_tx.send(msg.clone());
                    }
                    if let async_nats::Event::ClientError(e) = &event {
                        // One line per failed attempt (the retries back off to 2 s), naming
                        // each server and why it cannot be reached.
                        for url in &servers {
                            let why = reach(url).await.unwrap_or_else(|| e.to_string());
                            tracing::warn!(
                                "federation: cannot reach NATS at {url}: {why}; retrying"
                            );
                        }
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
        // One wildcard subscription per role (the client's request inbox is the fourth, or
        // fifth with shares): the server's and this node's costs grow with the nodes, never
        // with their pairs.
        let subscribe = |subject: String| {
            let client = client.clone();
            async move {
                client.subscribe(subject.clone()).await.map_err(|e| {
                    tracing::error!(error = %e, subject, "federation: cannot subscribe");
                })
            }
        };
        let Ok(mut answers) = subscribe(this.answers_wildcard()).await else {
            return;
        };
        let Ok(mut syncs) = subscribe(this.sync_wildcard()).await else {
            return;
        };
        let Ok(mut hellos) = subscribe(this.hello_inbox()).await else {
            return;
        };
        let mut shares = if this.accept {
            let Ok(s) = subscribe(this.q_subject("*")).await else {
                return;
            };
            Some(s)
        } else {
            None
        };
        let (synced_tx, mut synced_rx) = mpsc::channel::<peers::Synced>(256);
        let mut peers = peers::Peers::default();
        let mut out = Outgoing::default();
        let mut heartbeat = tokio::time::interval(this.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut perm = perm_tx.subscribe();
        // The answers of local UIs on their way to their origins, each awaiting its reply.
        let mut forwards = FuturesUnordered::new();
        if client.connection_state() == async_nats::connection::State::Connected {
            this.connected(&client, &mut out, &mut peers, &synced_tx)
                .await;
        }
        // Made once: a fresh one each turn of the loop would join and leave the token's
        // waiters (a lock each) for every message.
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        loop {
            let judging = this.status.connected();
            let next_expiry = peers.next_expiry(this.node_timeout);
            let expiry = async {
                match (judging, next_expiry) {
                    (true, Some(at)) => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut stopped => break,
                ev = ev_rx.recv() => match ev {
                    Some(async_nats::Event::Connected) if !this.status.connected() => {
                        this.connected(&client, &mut out, &mut peers, &synced_tx).await;
                    }
                    Some(async_nats::Event::Disconnected) => {
                        this.status.connected.store(false, Ordering::Relaxed);
                        this.status.reconnects.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("federation: disconnected from NATS; the local bus carries on");
                    }
                    Some(other) => tracing::debug!(event = %other, "federation: NATS event"),
                    None => {}
                },
                msg = perm.recv() => {
                    if let Ok(msg) = msg {
                        this.server_error(&msg);
                    }
                }
                outs = rx.recv() => {
                    let Some(outs) = outs else { break };
                    for o in outs {
                        this.handle_out(o, &client, &mut out, &perm_tx, &mut forwards).await;
                    }
                    if this.resync.swap(false, Ordering::Relaxed) {
                        // Shares or ends were lost before they reached this task: a hole in
                        // the sequence makes every node that follows this one sync.
                        out.seq += 1;
                        this.beat(&client, &mut out, wire::Presence::Beat).await;
                    }
                }
                msg = answers.next() => {
                    let Some(msg) = msg else { break };
                    // The answers already here are decided before the producers' sockets are
                    // written: one write per producer for a burst.
                    let mut batch = Batch::new();
                    this.answer(&client, msg, &mut batch).await;
                    for _ in 1..BURST {
                        let Some(Some(msg)) = answers.next().now_or_never() else { break };
                        this.answer(&client, msg, &mut batch).await;
                    }
                    batch.flush();
                }
                Some(done) = forwards.next(), if !forwards.is_empty() => {
                    let mut batch = Batch::new();
                    this.forwarded(done, &mut batch);
                    for _ in 1..BURST {
                        let Some(Some(done)) = forwards.next().now_or_never() else { break };
                        this.forwarded(done, &mut batch);
                    }
                    batch.flush();
                }
                msg = syncs.next() => {
                    let Some(msg) = msg else { break };
                    // What the broker already decided goes out first, so a page is never
                    // older than the live messages that follow it.
                    while let Ok(outs) = rx.try_recv() {
                        for o in outs {
                            this.handle_out(o, &client, &mut out, &perm_tx, &mut forwards).await;
                        }
                    }
                    this.serve_sync(&client, msg, out.seq).await;
                }
                msg = next_share(&mut shares) => {
                    let Some(msg) = msg else { break };
                    // Likewise, what a burst of shares and ends shows and withdraws reaches
                    // each UI in one write.
                    let mut batch = Batch::new();
                    this.received(&client, msg, &mut peers, &synced_tx, &mut batch).await;
                    for _ in 1..BURST {
                        let Some(Some(msg)) = next_share(&mut shares).now_or_never() else { break };
                        this.received(&client, msg, &mut peers, &synced_tx, &mut batch).await;
                    }
                    batch.flush();
                }
                msg = hellos.next() => {
                    let Some(msg) = msg else { break };
                    this.hint(&client, msg, &mut peers, &synced_tx);
                }
                done = synced_rx.recv() => {
                    if let Some(done) = done {
                        this.synced(&client, done, &mut peers, &synced_tx);
                    }
                }
                _ = heartbeat.tick() => {
                    if this.status.connected() {
                        this.tick(&client, &mut out).await;
                    }
                }
                _ = expiry => this.expire(&mut peers),
            }
        }
        // A clean stop: the ends the shutdown queued go out, then a bye, and the other nodes
        // drop whatever of this one's is left at once.
        if this.status.connected() {
            while let Ok(outs) = rx.try_recv() {
                for o in outs {
                    if !matches!(o, FedOut::Forward(_)) {
                        this.handle_out(o, &client, &mut out, &perm_tx, &mut forwards)
                            .await;
                    }
                }
            }
            this.beat(&client, &mut out, wire::Presence::Bye).await;
            let _ = tokio::time::timeout(Duration::from_secs(5), client.flush()).await;
        }
    }

    /// Every (re)connect: what was asked and ended meanwhile goes out, then a hello, which
    /// tells the nodes that follow this one its sequence number (a node that missed some
    /// syncs) and asks the nodes that hear it to name themselves; and this node syncs every
    /// node it follows, as it may have missed their messages.
    async fn connected(
        &self,
        client: &async_nats::Client,
        out: &mut Outgoing,
        peers: &mut peers::Peers,
        synced_tx: &mpsc::Sender<peers::Synced>,
    ) {
        self.status.connected.store(true, Ordering::Relaxed);
        tracing::info!(node = %self.node, "federation: connected to NATS");
        if std::mem::take(&mut out.overflowed) {
            out.seq += 1;
        }
        let queued = std::mem::take(&mut out.offline);
        // A question asked and ended while away was never seen: neither goes out.
        let ended: HashSet<Arc<str>> = queued
            .iter()
            .filter_map(|q| match q {
                Queued::End(e) => Some(e.id.clone()),
                Queued::Share(..) => None,
            })
            .collect();
        let shared_away: HashSet<Arc<str>> = queued
            .iter()
            .filter_map(|q| match q {
                Queued::Share(s, _) if ended.contains(&s.id) => Some(s.id.clone()),
                _ => None,
            })
            .collect();
        for q in queued {
            match q {
                Queued::Share(s, deadline_ms) if !shared_away.contains(&s.id) => {
                    self.publish_share(client, out, &s, deadline_ms).await;
                }
                Queued::End(e) if !shared_away.contains(&e.id) => {
                    self.publish_end(client, out, &e).await;
                }
                _ => {}
            }
        }
        self.beat(client, out, wire::Presence::Hello).await;
        peers.rejudge();
        if self.accept {
            for origin in peers.known() {
                if let Some(run) = peers.start_sync(&origin) {
                    self.spawn_sync(client, origin, run, synced_tx);
                }
            }
        }
    }

    /// The server refused something: a refusal on this node's own subjects means its
    /// credentials are not the node's it claims to be (or the config lacks a grant), and
    /// nothing it shares reaches anyone: said loudly, once per kind.
    fn server_error(&self, msg: &str) {
        let own = [
            self.q_subject(&self.node),
            self.sync_wildcard(),
            self.answers_wildcard(),
            self.hello_inbox(),
        ];
        if let Some(subject) = own.iter().find(|s| msg.contains(s.as_str())) {
            self.status.denied.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                node = %self.node,
                subject = %subject,
                error = msg,
                "federation: the NATS server refuses this node's own subject: are its \
                 credentials those of node {}? (see docs/nats-server.conf)",
                self.node
            );
        } else {
            tracing::warn!(error = msg, "federation: the NATS server refused something");
        }
    }
}

/// The next message on `P.q.*` (never, on a node that shows no remote questions).
async fn next_share(shares: &mut Option<async_nats::Subscriber>) -> Option<async_nats::Message> {
    match shares {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Who sent a message on one of this node's request subjects (`P.answer.<me>.<sender>`,
/// `P.sync.<me>.<sender>`) and where to reply, if it has the one shape such a request takes:
/// a core request whose reply goes to the sender's own inbox, without headers. The sender is
/// the subject's (which the server let it publish), never the payload's; a JetStream
/// delivery (reply `$JS.ACK…`) or anything else is refused.
fn request_shape<'m>(
    msg: &'m async_nats::Message,
    wildcard: &str,
) -> Result<(&'m str, async_nats::Subject), &'static str> {
    let reply = msg.reply.clone().ok_or("no reply subject")?;
    if reply.starts_with("$JS.") {
        return Err("a JetStream delivery, not a node's request");
    }
    let sender = msg
        .subject
        .strip_prefix(wildcard.trim_end_matches('*'))
        .filter(|s| config::valid_node(s))
        .ok_or("not this node's subject")?;
    // `config::inbox_prefix(sender)` and a dot, without making that string per message.
    if !reply
        .strip_prefix(config::INBOX)
        .and_then(|r| r.strip_prefix(sender))
        .is_some_and(|rest| rest.starts_with('.'))
    {
        return Err("the reply subject is not the sender's inbox");
    }
    if msg.headers.as_ref().is_some_and(|h| !h.is_empty()) {
        return Err("a request carries no headers");
    }
    Ok((sender, reply))
}

/// A refusal of what another node (or anyone) sent: counted and logged, never answered.
fn refuse(status: &FedStatus, msg: &async_nats::Message, why: &str) {
    status.refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        subject = %msg.subject,
        reply = msg.reply.as_deref().unwrap_or(""),
        why,
        "federation: a message was refused"
    );
}

/// Why a NATS server's address cannot be reached, as the OS says it (a TCP connect within a
/// second); `None` when it can be (the failure is then NATS's own, e.g. TLS or auth).
async fn reach(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let hostport = rest.rsplit('@').next().unwrap_or(rest);
    let hostport = hostport.split('/').next().unwrap_or(hostport);
    let target = if hostport
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        hostport.to_owned()
    } else {
        format!("{hostport}:4222")
    };
    match tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(&target),
    )
    .await
    {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("no answer from {target} within 1 s")),
    }
}
