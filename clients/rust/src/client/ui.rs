//! A UI's side of the bus: [`Ui`] subscribes (optionally filtered), yields questions and
//! approvals as [`UiEvent`]s and sends answers, dismissals and decisions; [`Ui::into_split`]
//! gives a reading half and a cloneable writing half for a UI that reads the bus and the
//! keyboard at once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use super::{default_socket_path, ClientError, Connection};
use crate::protocol::{
    encode, ApprovalAck, ClientFrame, Decision, ErrorFrame, Outcome, ServerFrame, SubscribeFilter,
    UiApproval, UiRequest, WithdrawReason,
};

/// What a UI is told. Questions and approvals share one correlationId space and one replay
/// (`pending_at_subscribe` counts both), so a UI that shows only questions must still count
/// the approvals of the replay.
#[derive(Debug, Clone)]
pub enum UiEvent {
    /// A question to answer ([`Ui::answer`], [`Ui::dismiss`]).
    Request(UiRequest),
    /// A question is no longer pending.
    Withdrawn {
        correlation_id: String,
        reason: WithdrawReason,
    },
    /// This UI's answer won; the producer is being sent it.
    Ack {
        correlation_id: String,
        outcome: Outcome,
    },
    /// An error about something this UI sent (e.g. `not-pending`: another UI was first).
    Error(ErrorFrame),
    /// An agent's tool call to approve or deny ([`Ui::decide`]); offer only its `outcomes`.
    Approval(Box<UiApproval>),
    /// An approval is no longer pending.
    ApprovalWithdrawn {
        correlation_id: String,
        reason: WithdrawReason,
    },
    /// This UI's decision won; the producer is being sent it.
    ApprovalAck(ApprovalAck),
}

impl UiEvent {
    /// The request the event is about (`None` for an error about no request in particular).
    pub fn correlation_id(&self) -> Option<&str> {
        match self {
            UiEvent::Request(r) => Some(&r.correlation_id),
            UiEvent::Approval(a) => Some(&a.correlation_id),
            UiEvent::Withdrawn { correlation_id, .. }
            | UiEvent::Ack { correlation_id, .. }
            | UiEvent::ApprovalWithdrawn { correlation_id, .. } => Some(correlation_id),
            UiEvent::ApprovalAck(a) => Some(&a.correlation_id),
            UiEvent::Error(e) => e.correlation_id.as_deref(),
        }
    }

    /// Whether it is a pending request (question or approval): what the replay counts.
    pub fn is_request(&self) -> bool {
        matches!(self, UiEvent::Request(_) | UiEvent::Approval(_))
    }
}

/// A subscribed UI.
pub struct Ui {
    conn: Connection,
    pending_at_subscribe: u64,
}

impl Ui {
    /// Connects and subscribes; the pending requests follow as events, oldest first.
    pub async fn subscribe(path: &Path, client: Option<&str>) -> Result<Ui, ClientError> {
        Ui::subscribe_filtered(path, client, &SubscribeFilter::default()).await
    }

    /// Connects and subscribes to the requests `filter` matches only (by their context):
    /// others are neither replayed nor sent live, nor may this UI answer them.
    pub async fn subscribe_filtered(
        path: &Path,
        client: Option<&str>,
        filter: &SubscribeFilter,
    ) -> Result<Ui, ClientError> {
        Ui::subscribe_via(path, client, filter, None).await
    }

    /// [`Ui::subscribe_filtered`], claiming the kind of UI this is (`tui`, `web`, `notify`,
    /// …): the daemon records it as `decidedBy.via` of what this UI decides.
    pub async fn subscribe_via(
        path: &Path,
        client: Option<&str>,
        filter: &SubscribeFilter,
        via: Option<&str>,
    ) -> Result<Ui, ClientError> {
        let mut conn = Connection::connect(path).await?;
        conn.send(&ClientFrame::Subscribe {
            client,
            filter: Some(filter),
            via,
        })
        .await?;
        loop {
            match conn.recv().await? {
                Some(ServerFrame::Subscribed { pending }) => {
                    return Ok(Ui {
                        conn,
                        pending_at_subscribe: pending,
                    })
                }
                Some(ServerFrame::Error(e)) => return Err(ClientError::Rejected(e)),
                Some(_) => continue,
                None => return Err(ClientError::Closed),
            }
        }
    }

    /// [`Ui::subscribe`] on the default socket ([`default_socket_path`]).
    pub async fn subscribe_default(client: Option<&str>) -> Result<Ui, ClientError> {
        Ui::subscribe(&default_socket_path(), client).await
    }

    /// How many requests were pending when the subscription began (the replay's length).
    pub fn pending_at_subscribe(&self) -> u64 {
        self.pending_at_subscribe
    }

    /// The next event, or `None` when the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Option<UiEvent>, ClientError> {
        loop {
            match self.conn.recv().await? {
                None => return Ok(None),
                Some(frame) => {
                    if let Some(event) = ui_event(frame) {
                        return Ok(Some(event));
                    }
                }
            }
        }
    }

    pub async fn answer(
        &mut self,
        correlation_id: &str,
        answers: &BTreeMap<usize, String>,
    ) -> Result<(), ClientError> {
        self.conn.send(&answer_frame(correlation_id, answers)).await
    }

    /// The user dismissed the dialog.
    pub async fn dismiss(&mut self, correlation_id: &str) -> Result<(), ClientError> {
        self.conn
            .send(&dismiss_frame(correlation_id, &BTreeMap::new()))
            .await
    }

    /// Decides an approval: e.g. [`Decision::allow_once`], [`Decision::deny`] with the reason
    /// the agent is told, or [`Decision::Dismissed`]. The daemon answers
    /// [`UiEvent::ApprovalAck`] when it won, or [`UiEvent::Error`] (`not-pending`: another UI
    /// was first; `invalid-response`: an outcome the request does not offer).
    pub async fn decide(
        &mut self,
        correlation_id: &str,
        decision: &Decision,
    ) -> Result<(), ClientError> {
        self.conn.send(&decision.frame(correlation_id)).await
    }

    /// Splits the subscription so events can be read while answers are sent from elsewhere
    /// (an interactive UI reads the bus and the keyboard at once).
    pub fn into_split(self) -> (UiEvents, UiAnswerer) {
        let (reader, writer) = self.conn.into_split();
        (
            UiEvents { reader },
            UiAnswerer {
                writer: Arc::new(AsyncMutex::new(writer)),
            },
        )
    }
}

/// The reading half of a split [`Ui`].
pub struct UiEvents {
    reader: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
}

impl UiEvents {
    /// The next event, or `None` when the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Option<UiEvent>, ClientError> {
        loop {
            let payload = match self.reader.next().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(payload)) => payload,
            };
            let frame: ServerFrame = serde_json::from_slice(&payload)
                .map_err(|e| ClientError::Protocol(e.to_string()))?;
            if let Some(event) = ui_event(frame) {
                return Ok(Some(event));
            }
        }
    }
}

/// The writing half of a split [`Ui`]; clones share the one connection.
#[derive(Clone)]
pub struct UiAnswerer {
    writer: Arc<AsyncMutex<FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>>>,
}

impl UiAnswerer {
    pub async fn answer(
        &self,
        correlation_id: &str,
        answers: &BTreeMap<usize, String>,
    ) -> Result<(), ClientError> {
        let frame = encode(&answer_frame(correlation_id, answers));
        self.writer.lock().await.send(frame).await?;
        Ok(())
    }

    /// [`UiAnswerer::answer`] naming who answered (a chat platform's user id and name): the
    /// daemon records it, as claimed, in `decidedBy.user`.
    pub async fn answer_by(
        &self,
        correlation_id: &str,
        answers: &BTreeMap<usize, String>,
        user: &str,
    ) -> Result<(), ClientError> {
        let mut frame = answer_frame(correlation_id, answers);
        if let ClientFrame::AskUserResponse { user: u, .. } = &mut frame {
            *u = Some(user);
        }
        self.writer.lock().await.send(encode(&frame)).await?;
        Ok(())
    }

    /// [`UiAnswerer::decide`] naming who decided, recorded in `decidedBy.user`.
    pub async fn decide_by(
        &self,
        correlation_id: &str,
        decision: &Decision,
        user: &str,
    ) -> Result<(), ClientError> {
        let mut frame = decision.frame(correlation_id);
        if let ClientFrame::ToolConfirmationResponse { user: u, .. } = &mut frame {
            *u = Some(user);
        }
        self.writer.lock().await.send(encode(&frame)).await?;
        Ok(())
    }

    /// The user dismissed the dialog.
    pub async fn dismiss(&self, correlation_id: &str) -> Result<(), ClientError> {
        let frame = encode(&dismiss_frame(correlation_id, &BTreeMap::new()));
        self.writer.lock().await.send(frame).await?;
        Ok(())
    }

    /// Sends any other frame on this UI's connection (e.g. a notifier's `notify-report`).
    pub async fn send(&self, frame: &ClientFrame<'_>) -> Result<(), ClientError> {
        let frame = encode(frame);
        self.writer.lock().await.send(frame).await?;
        Ok(())
    }

    /// Decides an approval, as [`Ui::decide`].
    pub async fn decide(
        &self,
        correlation_id: &str,
        decision: &Decision,
    ) -> Result<(), ClientError> {
        let frame = encode(&decision.frame(correlation_id));
        self.writer.lock().await.send(frame).await?;
        Ok(())
    }
}

fn answer_frame<'a>(
    correlation_id: &'a str,
    answers: &'a BTreeMap<usize, String>,
) -> ClientFrame<'a> {
    ClientFrame::AskUserResponse {
        correlation_id,
        answers,
        cancelled: false,
        user: None,
    }
}

fn dismiss_frame<'a>(
    correlation_id: &'a str,
    no_answers: &'a BTreeMap<usize, String>,
) -> ClientFrame<'a> {
    ClientFrame::AskUserResponse {
        correlation_id,
        answers: no_answers,
        cancelled: true,
        user: None,
    }
}

/// The UI event a daemon frame carries, if it is one a UI acts on.
fn ui_event(frame: ServerFrame) -> Option<UiEvent> {
    Some(match frame {
        ServerFrame::AskUserRequest(r) => UiEvent::Request(r),
        ServerFrame::AskUserWithdrawn {
            correlation_id,
            reason,
            ..
        } => UiEvent::Withdrawn {
            correlation_id,
            reason,
        },
        ServerFrame::AskUserAck {
            correlation_id,
            outcome,
        } => UiEvent::Ack {
            correlation_id,
            outcome,
        },
        ServerFrame::Error(e) => UiEvent::Error(e),
        ServerFrame::ToolConfirmationRequest(a) => UiEvent::Approval(Box::new(a)),
        ServerFrame::ToolConfirmationWithdrawn(w) => UiEvent::ApprovalWithdrawn {
            correlation_id: w.correlation_id,
            reason: w.reason,
        },
        ServerFrame::ToolConfirmationAck(a) => UiEvent::ApprovalAck(a),
        _ => return None,
    })
}
