//! Answers across nodes: a local UI's answer to a remote question goes to its origin as a
//! NATS request and the UI gets the origin's decision (or a clear error: origin unreachable,
//! no permission to publish there); a remote UI's answer to a local question arrives here and
//! is decided by the broker like a local UI's.

use futures_util::future::BoxFuture;

use super::*;
use crate::broker::{Acked, PeerId};

/// The local UIs' answers on their way to their origins: polled by the task's loop, which
/// hands each decision to its UI (a burst of them in one write per UI).
pub(super) type Forwards = FuturesUnordered<BoxFuture<'static, Forwarded>>;

/// An origin's decision on a local UI's answer, or why it never got there.
pub(super) struct Forwarded {
    ui: PeerId,
    id: String,
    decision: Result<Acked, FrameError>,
}

impl Task {
    /// Sends a local UI's answer to the origin; resolves to the origin's decision.
    pub(super) async fn forward(
        self: Arc<Self>,
        client: async_nats::Client,
        f: Forward,
        mut perm: broadcast::Receiver<String>,
    ) -> Forwarded {
        let id = f.response.correlation_id().to_owned();
        let subject = self.answer_subject(&f.origin);
        let body = wire::answer_request(&f.response, &f.by, f.ui);
        let request = async_nats::Request::new()
            .payload(body.into())
            .timeout(Some(self.answer_timeout));
        let refused = async {
            loop {
                match perm.recv().await {
                    Ok(msg) if mentions(&msg, &subject) => return msg,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        let decision = tokio::select! {
            r = client.send_request(subject.clone(), request) => match r {
                Ok(msg) => match serde_json::from_slice::<AnswerReply>(&msg.payload) {
                    Ok(reply) => reply.decision(&id),
                    Err(_) => Err(unreachable(&id, &format!("node {} sent a reply this node cannot read", f.origin))),
                },
                Err(e) => {
                    use async_nats::client::RequestErrorKind;
                    let why = match e.kind() {
                        RequestErrorKind::NoResponders => format!("node {} is not connected to NATS (no responder on {subject})", f.origin),
                        RequestErrorKind::TimedOut => format!("node {} did not reply within {} ms", f.origin, self.answer_timeout.as_millis()),
                        _ => format!("NATS: {e}"),
                    };
                    Err(unreachable(&id, &why))
                }
            },
            msg = refused => Err(FrameError::new(
                ErrorCode::Forbidden,
                format!("the NATS server refused to carry this answer to node {}: {msg}", f.origin),
            ).with_id(Some(&id))),
        };
        Forwarded {
            ui: f.ui,
            id,
            decision,
        }
    }

    /// Hands a local UI the origin's decision on its answer (queued on `batch`).
    pub(super) fn forwarded(&self, done: Forwarded, batch: &mut Batch) {
        let Forwarded { ui, id, decision } = done;
        if decision.is_ok() {
            self.status.forwarded.fetch_add(1, Ordering::Relaxed);
        } else {
            self.status.forward_errors.fetch_add(1, Ordering::Relaxed);
        }
        self.hub
            .run_in(batch, |b, _, fx| b.forwarded(ui, &id, decision, fx));
    }

    /// Another node's UI answers a question asked here. Only a core request on
    /// `P.answer.<this node>.<sender>` whose reply goes to the sender's own inbox is taken, and
    /// the sender is the subject's (which the server let it publish), never the payload's: a
    /// JetStream delivery (reply `$JS.ACK…`) or a message of any other shape is refused and
    /// logged, unanswered. The producer's frame is queued on `batch`.
    pub(super) async fn answer(
        &self,
        client: &async_nats::Client,
        msg: async_nats::Message,
        batch: &mut Batch,
    ) {
        let (sender, reply) = match request_shape(&msg, &self.subjects.answers) {
            Ok((sender, reply)) => (sender.to_owned(), reply),
            Err(why) => return refuse(&self.status, &msg, why),
        };
        let decision = match wire::parse_answer(&msg.payload) {
            Ok((resp, mut by, peer)) => {
                by.node = Some(sender);
                self.hub.run_in(batch, |b, now, fx| {
                    b.respond_remote(resp, by, peer, now, fx)
                })
            }
            Err(err) => Err(err),
        };
        let body = wire::answer_reply(&decision);
        if let Err(e) = client.publish(reply, body.into()).await {
            tracing::warn!(error = %e, "federation: answer reply not sent");
        }
    }
}

/// Whether a server error names `subject` (as "Permissions Violation for Publish to …").
fn mentions(msg: &str, subject: &str) -> bool {
    msg.match_indices(subject).any(|(at, _)| {
        let after = msg[at + subject.len()..].chars().next();
        !matches!(after, Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    })
}
