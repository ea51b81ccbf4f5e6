//! What the other nodes share, as this node's KV watches see it: their presence (a node not
//! heard from within the timeout has its questions withdrawn and its watch stopped) and the
//! questions of each node alive (shown to this node's UIs, withdrawn when their entry goes).

use super::*;

impl Task {
    pub(super) fn pending_entry(&self, e: kv::Entry, presence: &Presence) {
        let Some((node, _)) = e.key.split_once('.') else {
            return;
        };
        if node == self.node {
            return;
        }
        let node = node.to_owned();
        match e.operation {
            kv::Operation::Put => {}
            kv::Operation::Delete | kv::Operation::Purge => {
                // Its entry expired (a grace after its deadline) or was removed.
                let Some(id) = e.key.split_once('.').and_then(|(_, k)| wire::id_of_key(k)) else {
                    return;
                };
                self.hub.run(|b, now, fx| {
                    b.remote_end(&node, &id, WithdrawReason::Timeout, None, None, now, fx)
                });
                return;
            }
        }
        if e.value.len() > self.max_frame_bytes {
            self.status.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                node,
                key = %e.key,
                bytes = e.value.len(),
                limit = self.max_frame_bytes,
                "federation: a remote question larger than max_frame_bytes was refused"
            );
            return;
        }
        let Some(entry) = wire::parse_entry(&e.value) else {
            tracing::warn!(key = %e.key, "federation: an entry this node cannot read; ignored");
            return;
        };
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
                self.hub.run(|b, now, fx| {
                    b.remote_end(&node, &id, reason, answered_by, winner, now, fx)
                });
            }
            // A node's questions are watched only while it is alive; one that went in the
            // meantime has its watch stopped and its questions withdrawn.
            q @ Entry::Question { .. } => {
                if presence.alive.contains_key(&node) {
                    self.show(&node, q);
                }
            }
        }
    }

    pub(super) fn show(&self, node: &str, q: Entry) {
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
        if let Err(refusal) = self.hub.run(|b, now, fx| b.remote_ask(q, now, fx)) {
            self.status.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(node, id, error = %refusal, "federation: a remote question over this node's limits was refused");
        }
    }

    /// A beat or the end of a node. Fails only when a new node's questions cannot be watched.
    pub(super) async fn node_entry(
        &self,
        e: kv::Entry,
        presence: &mut Presence,
        session: &mut Session,
    ) -> Result<(), async_nats::Error> {
        let node = e.key.clone();
        if node == self.node {
            return Ok(());
        }
        match e.operation {
            kv::Operation::Put => {
                let new = presence
                    .alive
                    .insert(node.clone(), Instant::now())
                    .is_none();
                if new {
                    tracing::info!(node, "federation: node joined");
                    self.publish_nodes(presence);
                }
                // Its first beat in this session (a reconnect starts the watches afresh).
                session.watch(&node).await?;
            }
            kv::Operation::Delete | kv::Operation::Purge => {
                session.unwatch(&node);
                if presence.alive.remove(&node).is_some() {
                    tracing::info!(node, "federation: node left");
                    self.publish_nodes(presence);
                }
                self.hub.run(|b, now, fx| b.node_gone(&node, now, fx));
            }
        }
        Ok(())
    }

    pub(super) fn expire_nodes(&self, presence: &mut Presence, mut session: Option<&mut Session>) {
        let now = Instant::now();
        let gone: Vec<String> = presence
            .alive
            .iter()
            .filter(|(_, seen)| **seen + self.node_timeout <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for node in gone {
            presence.alive.remove(&node);
            if let Some(s) = session.as_deref_mut() {
                s.unwatch(&node);
            }
            tracing::warn!(
                node,
                timeout_ms = self.node_timeout.as_millis() as u64,
                "federation: node not heard from; its questions are withdrawn"
            );
            self.hub.run(|b, now, fx| b.node_gone(&node, now, fx));
        }
        self.publish_nodes(presence);
    }

    pub(super) fn publish_nodes(&self, presence: &Presence) {
        let mut nodes: Vec<String> = presence.alive.keys().cloned().collect();
        nodes.sort();
        *self.status.nodes.lock().unwrap_or_else(|e| e.into_inner()) = nodes;
    }
}
