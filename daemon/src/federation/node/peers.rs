//! The other nodes as this one follows them, from their messages on `P.q.<node>`: each
//! node's epoch and last sequence number (a message out of sequence, a beat ahead of what was
//! read, or a new epoch makes this node sync that node's pending), presence (a node that had
//! questions pending and stops beating is gone, its questions withdrawn), and the questions
//! they share (shown to this node's UIs, within its limits) and end.

use super::*;

use wire::{Entry, Message, Msg, ParseError};

/// What a node's `P.q.<node>` may carry beyond a frame: the envelope and the share's fields
/// around the questions.
const ENVELOPE_SLACK: usize = 4096;

/// The nodes this one follows.
#[derive(Default)]
pub(super) struct Peers {
    map: HashMap<Arc<str>, Peer>,
    next_run: u64,
    /// Nodes already logged as speaking another protocol version (once each).
    incompatible: HashSet<String>,
}

struct Peer {
    /// Its epoch (its start); 0 while it is only named by a hello's reply.
    epoch: u64,
    /// The last sequence number read (live or through a sync).
    last: u64,
    heard: Instant,
    /// It has questions pending, so it beats: silence past the timeout means it is gone.
    beating: bool,
    /// Heard from on its own subject (or it answered a sync): listed in `nodes`.
    confirmed: bool,
    sync: Option<Run>,
}

/// A sync in flight, and what live messages said meanwhile: a live message newer than the
/// page that holds the same question wins over the page.
struct Run {
    id: u64,
    touched: HashMap<String, u64>,
}

/// A sync's result, back in the task.
pub(super) struct Synced {
    pub origin: Arc<str>,
    pub run: u64,
    pub result: Result<sync::Fetched, String>,
}

impl Peers {
    /// When the first node that beats would be overdue.
    pub fn next_expiry(&self, timeout: Duration) -> Option<Instant> {
        self.map
            .values()
            .filter(|p| p.beating)
            .map(|p| p.heard + timeout)
            .min()
    }

    /// Presence is judged afresh from now (after this node was away: nobody was heard).
    pub fn rejudge(&mut self) {
        let now = Instant::now();
        for p in self.map.values_mut() {
            p.heard = now;
        }
    }

    /// The nodes heard from.
    pub fn known(&self) -> Vec<Arc<str>> {
        self.map
            .iter()
            .filter(|(_, p)| p.confirmed)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Starts a sync of `origin` unless one is in flight; returns its run.
    pub fn start_sync(&mut self, origin: &str) -> Option<u64> {
        let peer = self.map.get_mut(origin)?;
        if peer.sync.is_some() {
            return None;
        }
        self.next_run += 1;
        peer.sync = Some(Run {
            id: self.next_run,
            touched: HashMap::new(),
        });
        Some(self.next_run)
    }

    fn names(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .map
            .iter()
            .filter(|(_, p)| p.confirmed)
            .map(|(n, _)| n.to_string())
            .collect();
        nodes.sort();
        nodes
    }
}

impl Task {
    /// A message on `P.q.<origin>`: its origin is the subject's (the server let only that
    /// node publish it), what it says is checked before anything is shown. The frames it makes
    /// for local UIs are queued on `batch` (the caller writes them after a burst).
    pub(super) async fn received(
        &self,
        client: &async_nats::Client,
        msg: async_nats::Message,
        peers: &mut Peers,
        synced_tx: &mpsc::Sender<Synced>,
        batch: &mut Batch,
    ) {
        let Some(origin) = msg
            .subject
            .strip_prefix(self.subjects.q_prefix.as_str())
            .filter(|n| config::valid_node(n))
        else {
            return refuse(&self.status, &msg, "not a node's subject");
        };
        if origin == self.node {
            return;
        }
        if msg.payload.len() > self.max_frame_bytes + ENVELOPE_SLACK {
            self.status.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                node = origin,
                bytes = msg.payload.len(),
                limit = self.max_frame_bytes,
                "federation: a remote question larger than max_frame_bytes was refused"
            );
            return;
        }
        if msg.headers.as_ref().is_some_and(|h| !h.is_empty()) {
            return refuse(&self.status, &msg, "a node's message carries no headers");
        }
        let m = match wire::parse_message(&msg.payload) {
            Ok(m) => m,
            Err(ParseError::Version(v)) => {
                self.status.refused.fetch_add(1, Ordering::Relaxed);
                if peers.incompatible.insert(origin.to_owned()) {
                    tracing::error!(
                        node = origin,
                        version = v,
                        ours = wire::VERSION,
                        "federation: node {origin} speaks federation protocol v{v}, this node \
                         v{}: not federating with it (upgrade both to the same askbusd)",
                        wire::VERSION
                    );
                }
                return;
            }
            Err(ParseError::Malformed(why)) => return refuse(&self.status, &msg, &why),
        };
        if let (Msg::Beat { hello: true, .. }, Some(reply)) = (&m.body, &msg.reply) {
            // Only to the hello's sender's own inbox (which the server lets this node reply
            // to once): this node's name, so a late joiner learns whom to sync.
            if **reply == format!("{}.hello", config::inbox_prefix(origin)) && self.accept {
                let _ = client
                    .publish(reply.clone(), wire::hello_reply(&self.node).into())
                    .await;
            }
        }
        let origin: Arc<str> = Arc::from(origin);
        if let Some(run) = self.apply(peers, &origin, m, batch) {
            self.spawn_sync(client, origin, run, synced_tx);
        }
    }

    /// Applies one message of `origin`; returns a sync to start when this node is behind.
    fn apply(
        &self,
        peers: &mut Peers,
        origin: &Arc<str>,
        m: Message,
        batch: &mut Batch,
    ) -> Option<u64> {
        let now = Instant::now();
        let peer = peers.map.entry(origin.clone()).or_insert_with(|| Peer {
            epoch: m.epoch,
            last: 0,
            heard: now,
            beating: false,
            confirmed: false,
            sync: None,
        });
        if peer.epoch == 0 {
            peer.epoch = m.epoch;
        }
        if m.epoch < peer.epoch {
            tracing::debug!(
                node = &**origin,
                "federation: a message of a previous run; ignored"
            );
            return None;
        }
        let mut behind = false;
        if m.epoch > peer.epoch {
            // It restarted: what it shares now is learnt afresh, and what it no longer
            // shares is withdrawn by the sync.
            tracing::info!(node = &**origin, "federation: node restarted");
            peer.epoch = m.epoch;
            peer.last = 0;
            peer.sync = None;
            behind = true;
        }
        peer.heard = now;
        let joined = !std::mem::replace(&mut peer.confirmed, true);
        match m.body {
            Msg::Bye => {
                peers.map.remove(origin);
                tracing::info!(node = &**origin, "federation: node left");
                self.hub
                    .run_in(batch, |b, now, fx| b.node_gone(origin, now, fx));
                self.publish_nodes(peers);
                return None;
            }
            Msg::Beat { pending, .. } => {
                peer.beating = pending > 0;
                behind |= m.seq > peer.last;
            }
            Msg::Share(entry) | Msg::End(entry) => {
                if m.seq <= peer.last {
                    // A duplicate or a replay: already applied.
                    tracing::debug!(
                        node = &**origin,
                        seq = m.seq,
                        "federation: an old message; ignored"
                    );
                } else {
                    behind |= m.seq != peer.last + 1;
                    peer.last = m.seq;
                    let id = match &entry {
                        Entry::Question { id, .. } | Entry::Ended { id, .. } => id.clone(),
                    };
                    if let Some(run) = &mut peer.sync {
                        run.touched.insert(id, m.seq);
                    }
                    if matches!(entry, Entry::Question { .. }) {
                        peer.beating = true;
                    }
                    self.entry(origin, entry, batch);
                }
            }
        }
        if joined {
            tracing::info!(node = &**origin, "federation: node joined");
            self.publish_nodes(peers);
        }
        if behind {
            peers.start_sync(origin)
        } else {
            None
        }
    }

    /// A share (shown) or an end (withdrawn, with its reason and who answered).
    fn entry(&self, origin: &str, entry: Entry, batch: &mut Batch) {
        match entry {
            Entry::Ended {
                id,
                reason,
                answered_by,
                winner_peer,
            } => {
                let winner = answered_by
                    .as_ref()
                    .filter(|by| by.node.as_deref() == Some(self.node.as_str()))
                    .and(winner_peer);
                self.hub.run_in(batch, |b, now, fx| {
                    b.remote_end(origin, &id, reason, answered_by, winner, now, fx)
                });
            }
            q @ Entry::Question { .. } => self.show(origin, q, batch),
        }
    }

    pub(super) fn show(&self, node: &str, q: Entry, batch: &mut Batch) {
        let Entry::Question {
            id,
            questions,
            approval,
            context,
            producer,
            deadline_ms,
        } = q
        else {
            return;
        };
        let now_ms = unix_ms(SystemTime::now());
        if deadline_ms <= now_ms {
            return;
        }
        let request = match wire::valid_request(&id, &questions, approval, context.as_deref()) {
            Ok(r) => r,
            Err(msg) => {
                self.status.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(node, id, error = %msg, "federation: a remote question failed validation; not shown");
                return;
            }
        };
        let q = RemoteQuestion {
            node: Arc::from(node),
            request,
            producer,
            remaining: Duration::from_millis(deadline_ms - now_ms),
        };
        if let Err(refusal) = self
            .hub
            .run_in(batch, |b, now, fx| b.remote_ask(q, now, fx))
        {
            self.status.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(node, id, error = %refusal, "federation: a remote question over this node's limits was refused");
        }
    }

    /// A reply to this node's hello names a node that heard it: a hint, which this node
    /// checks by syncing that node (only it can answer on `P.sync.<node>.*`).
    pub(super) fn hint(
        &self,
        client: &async_nats::Client,
        msg: async_nats::Message,
        peers: &mut Peers,
        synced_tx: &mpsc::Sender<Synced>,
    ) {
        // The server's "no responders" status, when nobody heard the hello, is no reply.
        if !self.accept || msg.status.is_some() {
            return;
        }
        let Some(node) = wire::parse_hello_reply(&msg.payload)
            .filter(|n| config::valid_node(n) && *n != self.node)
        else {
            return refuse(&self.status, &msg, "not a reply to a hello");
        };
        let node: Arc<str> = Arc::from(node);
        if peers.map.contains_key(&node) {
            return;
        }
        peers.map.insert(
            node.clone(),
            Peer {
                epoch: 0,
                last: 0,
                heard: Instant::now(),
                beating: false,
                confirmed: false,
                sync: None,
            },
        );
        if let Some(run) = peers.start_sync(&node) {
            self.spawn_sync(client, node, run, synced_tx);
        }
    }

    /// A sync came back: its questions are shown unless a newer live message said otherwise,
    /// and the questions of that node shown here that it no longer has are withdrawn.
    pub(super) fn synced(
        &self,
        client: &async_nats::Client,
        done: Synced,
        peers: &mut Peers,
        synced_tx: &mpsc::Sender<Synced>,
    ) {
        let origin = done.origin;
        let Some(peer) = peers.map.get_mut(&origin) else {
            return;
        };
        if peer.sync.as_ref().map(|r| r.id) != Some(done.run) {
            return;
        }
        let run = peer.sync.take().expect("checked above");
        let fetched = match done.result {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(node = &*origin, error = %e, "federation: sync failed");
                if !peer.confirmed {
                    // Named by a hello's reply, and not there: nobody.
                    peers.map.remove(&origin);
                }
                return;
            }
        };
        if fetched.epoch < peer.epoch {
            // It restarted while this sync ran: again, from its new run.
            if let Some(run) = peers.start_sync(&origin) {
                self.spawn_sync(client, origin, run, synced_tx);
            }
            return;
        }
        let mut touched = run.touched;
        if fetched.epoch > peer.epoch {
            peer.epoch = fetched.epoch;
            peer.last = 0;
            touched.clear();
        }
        if fetched.oversized > 0 {
            self.status
                .refused
                .fetch_add(fetched.oversized as u64, Ordering::Relaxed);
            tracing::warn!(
                node = &*origin,
                count = fetched.oversized,
                limit = self.max_frame_bytes,
                "federation: remote questions larger than max_frame_bytes were refused"
            );
        }
        let newer = |id: &str, seq: u64| touched.get(id).is_some_and(|&s| s > seq);
        let mut ids = HashSet::new();
        let mut batch = Batch::new();
        for (seq, entry) in fetched.items {
            let Entry::Question { id, .. } = &entry else {
                continue;
            };
            ids.insert(id.clone());
            if !newer(id, seq) {
                self.show(&origin, entry, &mut batch);
            }
        }
        let gone: Vec<Arc<str>> = self
            .hub
            .run(|b, _, _| b.remote_questions())
            .into_iter()
            .filter(|(o, id)| {
                **o == *origin && !ids.contains(&**id) && !newer(id, fetched.first_seq)
            })
            .map(|(_, id)| id)
            .collect();
        for id in gone {
            self.hub.run_in(&mut batch, |b, now, fx| {
                b.remote_end(&origin, &id, WithdrawReason::Withdrawn, None, None, now, fx)
            });
        }
        batch.flush();
        peer.last = peer.last.max(fetched.last_seq);
        peer.beating |= !ids.is_empty();
        peer.heard = Instant::now();
        if !std::mem::replace(&mut peer.confirmed, true) {
            tracing::info!(node = &*origin, "federation: node joined");
            self.publish_nodes(peers);
        }
    }

    /// Nodes with questions pending that stopped beating are gone: their questions are
    /// withdrawn `producer-gone`.
    pub(super) fn expire(&self, peers: &mut Peers) {
        let now = Instant::now();
        let gone: Vec<Arc<str>> = peers
            .map
            .iter()
            .filter(|(_, p)| p.beating && p.heard + self.node_timeout <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for node in gone {
            peers.map.remove(&node);
            tracing::warn!(
                node = &*node,
                timeout_ms = self.node_timeout.as_millis() as u64,
                "federation: node not heard from; its questions are withdrawn"
            );
            self.hub.run(|b, now, fx| b.node_gone(&node, now, fx));
        }
        self.publish_nodes(peers);
    }

    pub(super) fn publish_nodes(&self, peers: &Peers) {
        *self.status.nodes.lock().unwrap_or_else(|e| e.into_inner()) = peers.names();
    }
}
