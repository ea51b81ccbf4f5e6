//! Delivering a broker operation's effects, under the hub's lock: frames into the peers'
//! outboxes (or held at the store's gate), telemetry records, watcher events and federation
//! effects to their queues, and the replay steps a catching-up UI is owed. Delivery loops back
//! into the broker (`replay`, `forwarded`, `disconnect` of a peer that does not read) and
//! delivers what those make too, until nothing is left: right by design, as each of them is
//! one more operation under the same lock.

use super::*;

/// How many replayed requests a catching-up UI is handed per step (at most; the step is
/// bounded in bytes by the UI's queue too: `Outbox::replay_budget`).
const REPLAY_CHUNK: usize = 64;

/// One replay step for `peer` within what its outbox takes; a step whose next frame needs
/// a drained queue waits for it (`Outbox::want_replay_drained`).
pub(super) fn replay_step(
    broker: &mut Broker,
    outbox: &Outbox,
    peer: PeerId,
    now: Instant,
    fx: &mut Effects,
) {
    let (bytes, room) = outbox.replay_budget();
    let budget = crate::broker::ReplayBudget {
        frames: REPLAY_CHUNK,
        bytes,
        room,
    };
    if broker.replay(peer, budget, now, fx) == crate::broker::ReplayStep::Blocked {
        outbox.want_replay_drained();
    }
}

impl Hub {
    pub(super) fn deliver(&self, inner: &mut Inner, now: Instant, batch: &mut Batch) {
        // The first replay step of a UI that has room is taken here, under the same lock as
        // what asked for it (a subscribe), so the UI is caught up (usually: live) before any
        // other operation; later steps wait for its connection to ask (`Outbox::take_replay`),
        // so one UI catching up on a long table does not hold the lock for all of it.
        let mut inline_replays = 1;
        loop {
            let mut overflowed = Vec::new();
            if !inner.fx.durable.is_empty() {
                let ops = std::mem::take(&mut inner.fx.durable);
                if let Some(gate) = &mut inner.gate {
                    gate.submitted += 1;
                    let clock = Clock {
                        instant: now,
                        wall: SystemTime::now(),
                    };
                    gate.store.write(gate.submitted, clock, ops);
                }
            }
            for (peer, msg) in inner.fx.sends.drain(..) {
                let frame = match msg {
                    Msg::Frame(frame) => frame,
                    Msg::Error(err) => {
                        self.counters.count_error(err.code);
                        if err.code == ErrorCode::Forbidden {
                            let info = inner.broker.peer_info(peer).cloned().unwrap_or_default();
                            tracing::warn!(
                                peer,
                                pid = info.pid,
                                uid = info.uid,
                                "forbidden: {}",
                                err.message
                            );
                        }
                        encode(&ServerFrame::error(&err))
                    }
                };
                if let Some(gate) = inner.gate.as_mut().filter(|g| g.must_wait()) {
                    gate.held.push_back((gate.submitted, peer, frame));
                    continue;
                }
                if let Some(outbox) = inner.outboxes.get(&peer) {
                    match outbox.push(&frame, batch) {
                        Ok(()) => Counters::bump(&self.counters.frames_out),
                        Err(_) => overflowed.push(peer),
                    }
                }
            }
            for peer in std::mem::take(&mut inner.fx.replay) {
                let Some(outbox) = inner.outboxes.get(&peer) else {
                    continue;
                };
                if inline_replays > 0 && outbox.has_room_for_replay() {
                    inline_replays -= 1;
                    replay_step(&mut inner.broker, outbox, peer, now, &mut inner.fx);
                } else {
                    outbox.want_replay();
                }
            }
            if !inner.fx.federation.is_empty() {
                let outs = std::mem::take(&mut inner.fx.federation);
                let refused = match &inner.fed {
                    Some(link) => link.send(outs).unwrap_or_default(),
                    None => Vec::new(),
                };
                for out in refused {
                    // A queue too full for an answer: the UI is told at once, never left
                    // waiting for an ack (shares and ends are resent by the resync).
                    if let FedOut::Forward(f) = out {
                        let err = federation::unreachable(
                            f.response.correlation_id(),
                            "this node's federation queue is full",
                        );
                        inner.broker.forwarded(
                            f.ui,
                            f.response.correlation_id(),
                            Err(err),
                            &mut inner.fx,
                        );
                    }
                }
                if !inner.fx.sends.is_empty() {
                    continue;
                }
            }
            if !inner.fx.records.is_empty() || !inner.fx.events.is_empty() {
                let at = SystemTime::now();
                let node = inner.broker.federation().map(|f| f.node.to_string());
                for mut event in inner.fx.events.drain(..) {
                    event.ts = timestamp(at);
                    if event.node.is_none() {
                        event.node.clone_from(&node);
                    }
                    let uid = event.producer.uid;
                    let frame = encode(&ServerFrame::BusEvent(event));
                    for watcher in inner.broker.watchers_of(uid) {
                        if let Some(gate) = inner.gate.as_mut().filter(|g| g.must_wait()) {
                            gate.held
                                .push_back((gate.submitted, watcher, frame.clone()));
                            continue;
                        }
                        if let Some(outbox) = inner.outboxes.get(&watcher) {
                            match outbox.push(&frame, batch) {
                                Ok(()) => Counters::bump(&self.counters.frames_out),
                                Err(_) => overflowed.push(watcher),
                            }
                        }
                    }
                }
                for mut record in inner.fx.records.drain(..) {
                    tracing::debug!(
                        correlation_id = record.correlation_id,
                        reason = record.reason.as_str(),
                        code = record.code.map(|c| c.as_str()),
                        latency_ms = record.latency_ms,
                        pid = record.producer.pid,
                        uid = record.producer.uid,
                        ui_pid = record.ui.as_ref().and_then(|u| u.pid),
                        "request ended"
                    );
                    if record.reason.by_ui() {
                        self.metrics.observe_answer_latency_ms(
                            record.latency_ms,
                            record.approval.is_some(),
                        );
                    }
                    record.ts = at;
                    record.node = Some(self.node.clone());
                    self.telemetry.send(record);
                }
            }
            if overflowed.is_empty() {
                if inner.fx.sends.is_empty() && inner.fx.replay.is_empty() {
                    break;
                }
                // The replay step just taken produced frames.
                continue;
            }
            for peer in overflowed {
                self.drop_slow(inner, peer, now);
            }
        }
        for peer in inner.broker.take_finished() {
            if let Some(outbox) = inner.outboxes.get(&peer) {
                outbox.finish();
            }
        }
        if let Some(next) = inner.broker.next_deadline() {
            if inner.armed.is_none_or(|armed| next < armed) {
                inner.armed = Some(next);
                self.timer.notify_one();
            }
        }
    }

    /// A peer that does not read must not hold up anyone: drop it, and let the broker treat
    /// it as gone (its pending stay for the other UIs).
    pub(super) fn drop_slow(&self, inner: &mut Inner, peer: PeerId, now: Instant) {
        {
            {
                if let Some(outbox) = inner.outboxes.remove(&peer) {
                    outbox.cancel();
                    let info = inner.broker.peer_info(peer).cloned().unwrap_or_default();
                    if outbox.is_closed() {
                        // Its writer stopped on a failed write: the peer went away (killed,
                        // or closed its end) before its reader noticed. Not a slow reader.
                        tracing::debug!(
                            peer,
                            pid = info.pid,
                            "peer gone while frames were on their way to it"
                        );
                    } else {
                        Counters::bump(&self.counters.queue_overflows);
                        tracing::warn!(
                            peer,
                            pid = info.pid,
                            uid = info.uid,
                            client = info.client.as_deref().unwrap_or(""),
                            limit_bytes = outbox.limit(),
                            "outbound queue overflowed; disconnecting a peer that does not read"
                        );
                    }
                    inner.broker.disconnect(peer, now, &mut inner.fx);
                }
            }
        }
    }
}
