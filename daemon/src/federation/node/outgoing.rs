//! What this node tells the other nodes on `P.q.<node>`: its shares and ends, numbered in
//! one sequence, and its presence (hello, beats, bye) with the round trip measured on the
//! way; what the broker asks for while NATS is away is queued (bounded) and published on
//! reconnect, and a UI's answer to a remote question is handed to `answers`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::broadcast;

use super::answers::Forwards;
use super::{unix_ms, unreachable, wire, Task};
use crate::broker::{FedOut, SharedEnd, SharedQuestion};

/// A node with nothing pending measures its round trip to the server once every this many
/// heartbeats (one with pending questions, every heartbeat): an idle node costs the server
/// next to nothing.
const IDLE_RTT_EVERY: u32 = 15;

/// What this node has published, as the other nodes number it.
#[derive(Default)]
pub(super) struct Outgoing {
    /// The sequence number of the last share or end taken.
    pub(super) seq: u64,
    /// Shares and ends the broker asked for while NATS was away, in order (with a share's
    /// deadline fixed when it was asked): published on reconnect.
    pub(super) offline: Vec<Queued>,
    /// The offline queue overflowed: the reconnect leaves a hole in the sequence instead.
    pub(super) overflowed: bool,
    /// The last beat said this node had questions pending (the other nodes expect beats).
    pub(super) beating: bool,
    pub(super) ticks: u32,
}

pub(super) enum Queued {
    Share(SharedQuestion, u64),
    End(SharedEnd),
}

impl Task {
    pub(super) async fn publish(
        &self,
        client: &async_nats::Client,
        subject: async_nats::Subject,
        body: Vec<u8>,
    ) {
        if let Err(e) = client.publish(subject, body.into()).await {
            tracing::warn!(error = %e, "federation: not published");
        }
    }

    pub(super) async fn publish_share(
        &self,
        client: &async_nats::Client,
        out: &mut Outgoing,
        q: &SharedQuestion,
        deadline_ms: u64,
    ) {
        out.seq += 1;
        let body = wire::question(q, deadline_ms, self.epoch, out.seq);
        self.publish(client, self.subjects.own_q.clone(), body)
            .await;
    }

    pub(super) async fn publish_end(
        &self,
        client: &async_nats::Client,
        out: &mut Outgoing,
        end: &SharedEnd,
    ) {
        out.seq += 1;
        let body = wire::ended(end, self.epoch, out.seq);
        self.publish(client, self.subjects.own_q.clone(), body)
            .await;
    }

    /// A beat, hello or bye, with this node's last sequence number and how many questions it
    /// shares now. A hello is a request: the nodes that hear it reply with their names.
    pub(super) async fn beat(
        &self,
        client: &async_nats::Client,
        out: &mut Outgoing,
        kind: wire::Presence,
    ) {
        let (_, shared) = self.hub.run(|b, _, _| b.federated_counts());
        out.beating = shared > 0 && kind != wire::Presence::Bye;
        let body = wire::presence(kind, self.epoch, out.seq, shared);
        let subject = self.subjects.own_q.clone();
        let sent = if kind == wire::Presence::Hello {
            client
                .publish_with_reply(subject, self.hello_inbox(), body.into())
                .await
        } else {
            client.publish(subject, body.into()).await
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "federation: beat not sent");
        }
    }

    /// A heartbeat: a node with questions pending beats (the other nodes withdraw them when
    /// the beats stop); one that just had its last one end says so once, then stays quiet.
    pub(super) async fn tick(&self, client: &async_nats::Client, out: &mut Outgoing) {
        let (_, shared) = self.hub.run(|b, _, _| b.federated_counts());
        if shared > 0 || out.beating {
            self.beat(client, out, wire::Presence::Beat).await;
        }
        out.ticks = out.ticks.wrapping_add(1);
        if out.beating || out.ticks % IDLE_RTT_EVERY == 1 {
            let t0 = std::time::Instant::now();
            if tokio::time::timeout(self.answer_timeout, client.flush())
                .await
                .is_ok_and(|r| r.is_ok())
            {
                self.status
                    .rtt_us
                    .store(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        }
    }

    pub(super) async fn handle_out(
        self: &Arc<Self>,
        o: FedOut,
        client: &async_nats::Client,
        out: &mut Outgoing,
        perm_tx: &broadcast::Sender<String>,
        forwards: &mut Forwards,
    ) {
        let online = self.status.connected();
        match o {
            FedOut::Publish(q) => {
                let deadline_ms = unix_ms(SystemTime::now() + q.remaining);
                if online {
                    self.publish_share(client, out, &q, deadline_ms).await;
                } else {
                    self.queue(out, Queued::Share(q, deadline_ms));
                }
            }
            FedOut::Ended(end) => {
                if online {
                    self.publish_end(client, out, &end).await;
                } else {
                    self.queue(out, Queued::End(end));
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
                // Polled by the task's loop (no task of its own): the decisions of a burst
                // reach the UIs together.
                let perm = perm_tx.subscribe();
                forwards.push(Box::pin(self.clone().forward(client.clone(), f, perm)));
            }
        }
    }

    pub(super) fn queue(&self, out: &mut Outgoing, q: Queued) {
        if out.overflowed {
            return;
        }
        if out.offline.len() >= self.offline_limit {
            out.offline.clear();
            out.overflowed = true;
            return;
        }
        out.offline.push(q);
    }
}
