//! A producer that survives a daemon restart, as the Python and Node producers do. When its
//! connection drops (SIGKILL, a crash, or SIGTERM, whose `shutdown` answer it takes to mean
//! "ask the next daemon") it reconnects on the shared [`Backoff`] policy and asks every
//! unanswered question again under the same correlationId with what is left of its timeout,
//! so the question reaches the UIs of the new daemon. A resend answered
//! `duplicate-correlation-id` means a daemon that is still running holds the copy of the
//! dropped connection: it is retried until that copy is withdrawn. Only a deadline passing
//! with no daemon to take the question ends its `ask` (with the `shutdown` response if there
//! was one, else [`ClientError::Unreachable`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use super::confirm::{Confirm, Confirmation};
use super::{new_correlation_id, Ask, Backoff, ClientError, Connection};
use crate::protocol::{
    encode, ApprovalResponse, CancelReason, ClientFrame, ErrorCode, NoUiPolicy, Outcome,
    ProducerResponse, RequestContext, ServerFrame,
};

/// A request's terminal frame.
enum Terminal {
    Question(ProducerResponse),
    Approval(ApprovalResponse),
}

impl Terminal {
    fn reason(&self) -> Outcome {
        match self {
            Terminal::Question(r) => r.reason,
            Terminal::Approval(r) => r.reason,
        }
    }
}

type Waiter = oneshot::Sender<Result<Terminal, ClientError>>;

/// What is asked: a question set, or an approval (its frame's body, context included).
enum Body {
    Question {
        questions: Value,
        context: Option<RequestContext>,
    },
    Approval(Box<Confirm>),
}

/// One request (question or approval) waiting for its answer.
struct PendingAsk {
    body: Body,
    no_ui: Option<NoUiPolicy>,
    /// After this the question is over: the daemon's deadline, kept here for when no daemon
    /// holds it.
    deadline: Instant,
    waiter: Waiter,
    /// Sends so far; a `duplicate-correlation-id` after the first is the dropped connection's
    /// copy, still pending on a daemon that did not restart.
    sends: u32,
    /// A daemon that shut down answered `shutdown`: returned if no daemon comes back in time.
    shutdown_response: Option<Terminal>,
    cancel_requested: bool,
    dup_backoff: Backoff,
}

impl PendingAsk {
    /// The request frame, with what is left of its time.
    fn frame(&self, id: &str, now: Instant) -> bytes::Bytes {
        let left = self.deadline.saturating_duration_since(now);
        self.frame_with(id, Some((left.as_millis() as u64).max(1)))
    }

    fn frame_with(&self, id: &str, timeout_ms: Option<u64>) -> bytes::Bytes {
        match &self.body {
            Body::Question { questions, context } => encode(&ClientFrame::AskUserRequest {
                correlation_id: id,
                questions,
                timeout_ms,
                no_ui: self.no_ui,
                context: context.as_ref(),
            }),
            Body::Approval(c) => encode(&c.frame(id, timeout_ms, self.no_ui)),
        }
    }

    fn cancel_frame(&self, id: &str, why: &CancelReason) -> bytes::Bytes {
        let reason = match why {
            CancelReason::Withdrawn => None,
            r => Some(r.as_str()),
        };
        let via = why.via();
        match &self.body {
            Body::Question { .. } => encode(&ClientFrame::AskUserCancel {
                correlation_id: id,
                reason,
                via,
            }),
            Body::Approval(_) => encode(&ClientFrame::ToolConfirmationCancel {
                correlation_id: id,
                reason,
                via,
            }),
        }
    }
}

type Writer = FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>;

struct State {
    /// The live connection's writer, and its generation (bumped by every connection).
    writer: Option<Arc<tokio::sync::Mutex<Writer>>>,
    gen: u64,
    asks: HashMap<String, PendingAsk>,
    default_timeout_ms: u64,
    max_timeout_ms: u64,
    reconnecting: bool,
    tasks: Vec<JoinHandle<()>>,
}

struct Shared {
    path: PathBuf,
    client: Option<String>,
    reconnect: bool,
    backoff: Backoff,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A producer connection. `ask` may be called concurrently; each call gets its own answer.
pub struct Producer {
    shared: Arc<Shared>,
}

impl Drop for Producer {
    fn drop(&mut self) {
        for task in self.shared.state().tasks.drain(..) {
            task.abort();
        }
    }
}

/// How a [`Producer`] connects.
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// Announced to the UIs (e.g. `"my-agent/1.2"`).
    pub client: Option<String>,
    /// Reconnect and resend when the daemon goes away (the default); without it a dropped
    /// connection ends every pending `ask` with [`ClientError::Closed`].
    pub reconnect: bool,
    pub backoff: Backoff,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            client: None,
            reconnect: true,
            backoff: Backoff::default(),
        }
    }
}

impl Producer {
    /// Connects (reconnecting later as needed), announcing `client` to the UIs. Fails if no
    /// daemon answers now.
    pub async fn connect(path: &Path, client: Option<&str>) -> Result<Producer, ClientError> {
        let options = ProducerOptions {
            client: client.map(str::to_owned),
            ..ProducerOptions::default()
        };
        Producer::connect_with(path, options).await
    }

    /// Connects to the default socket (see [`crate::client::default_socket_path`]).
    pub async fn connect_default(client: Option<&str>) -> Result<Producer, ClientError> {
        Producer::connect(&super::default_socket_path(), client).await
    }

    pub async fn connect_with(
        path: &Path,
        options: ProducerOptions,
    ) -> Result<Producer, ClientError> {
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            client: options.client,
            reconnect: options.reconnect,
            backoff: options.backoff,
            state: Mutex::new(State {
                writer: None,
                gen: 0,
                asks: HashMap::new(),
                default_timeout_ms: 600_000,
                max_timeout_ms: 86_400_000,
                reconnecting: false,
                tasks: Vec::new(),
            }),
        });
        let conn = dial(&shared).await?;
        attach(&shared, conn);
        Ok(Producer { shared })
    }

    /// Asks and waits for the one terminal answer (or the error that rejected the request).
    pub async fn ask(&self, ask: Ask) -> Result<ProducerResponse, ClientError> {
        let body = Body::Question {
            questions: ask.questions,
            context: ask.context,
        };
        match self
            .request(ask.correlation_id, body, ask.timeout_ms, ask.no_ui)
            .await?
        {
            Terminal::Question(r) => Ok(r),
            Terminal::Approval(_) => Err(ClientError::Protocol(
                "askbusd answered a question with an approval's response".into(),
            )),
        }
    }

    /// Asks a person to approve an agent's tool call and waits for the decision. Fails
    /// closed: only a person's explicit approval has `confirmed` true; a timeout, a
    /// dismissal, no UI, a shutdown, a daemon that refused the request or could not be
    /// reached before the deadline all return `confirmed: false`, with the reason and a
    /// message for the agent saying why.
    pub async fn confirm(&self, confirm: Confirm) -> Confirmation {
        let id = confirm
            .correlation_id
            .clone()
            .unwrap_or_else(new_correlation_id);
        let (timeout_ms, no_ui) = (confirm.timeout_ms, confirm.no_ui);
        let result = self
            .request(
                Some(id.clone()),
                Body::Approval(Box::new(confirm)),
                timeout_ms,
                no_ui,
            )
            .await;
        match result {
            Ok(Terminal::Approval(r)) => Confirmation::from_response(r),
            Ok(Terminal::Question(_)) => Confirmation::failed(
                id,
                ClientError::Protocol(
                    "askbusd answered an approval with a question's response".into(),
                ),
            ),
            Err(e) => Confirmation::failed(id, e),
        }
    }

    /// Sends a request and waits for its terminal frame.
    async fn request(
        &self,
        correlation_id: Option<String>,
        body: Body,
        timeout_ms: Option<u64>,
        no_ui: Option<NoUiPolicy>,
    ) -> Result<Terminal, ClientError> {
        let id = correlation_id.unwrap_or_else(new_correlation_id);
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let (writer, frame) = {
            let mut st = self.shared.state();
            if st.asks.contains_key(&id) {
                // The daemon would refuse it too, but the first ask's answer would be lost.
                return Err(ClientError::Rejected(crate::protocol::ErrorFrame {
                    code: ErrorCode::DuplicateCorrelationId.into(),
                    message: format!("correlationId {id:?} is already being asked"),
                    correlation_id: Some(id),
                }));
            }
            let ms = timeout_ms
                .unwrap_or(st.default_timeout_ms)
                .clamp(1, st.max_timeout_ms);
            let pending = PendingAsk {
                body,
                no_ui,
                deadline: now + Duration::from_millis(ms),
                waiter: tx,
                sends: 1,
                shutdown_response: None,
                cancel_requested: false,
                dup_backoff: self.shared.backoff.clone(),
            };
            // The daemon clamps and defaults a timeout itself: the first send says what the
            // caller said.
            let frame = pending.frame_with(&id, timeout_ms);
            st.asks.insert(id.clone(), pending);
            (st.writer.clone(), frame)
        };
        match writer {
            Some(writer) => {
                if writer.lock().await.send(frame).await.is_err() {
                    // The reader sees the same drop and reconnects (or fails the asks).
                    lost(&self.shared, None);
                }
            }
            // The connection dropped while nothing was pending: this ask brings it back.
            None => lost(&self.shared, None),
        }
        rx.await.unwrap_or(Err(ClientError::Closed))
    }

    /// Withdraws a question or approval this producer asked; its `ask` (or `confirm`) returns
    /// reason `withdrawn`. Asked while no daemon holds the request, the `ask` ends at once
    /// with [`ClientError::Closed`] (a `confirm`, not confirmed).
    pub async fn cancel(&self, correlation_id: &str) -> Result<(), ClientError> {
        self.cancel_because(correlation_id, &CancelReason::Withdrawn)
            .await
    }

    /// Withdraws a request, saying why: [`CancelReason::AnsweredElsewhere`] when a person
    /// answered it outside askbus (its record then says a human decided it, `via` where).
    /// Otherwise as [`Producer::cancel`].
    pub async fn cancel_because(
        &self,
        correlation_id: &str,
        why: &CancelReason,
    ) -> Result<(), ClientError> {
        let (writer, frame) = {
            let mut st = self.shared.state();
            let writer = st.writer.clone();
            let frame = match st.asks.get_mut(correlation_id) {
                Some(ask) if writer.is_some() => {
                    ask.cancel_requested = true;
                    ask.cancel_frame(correlation_id, why)
                }
                Some(_) => {
                    let ask = st.asks.remove(correlation_id).expect("just found");
                    let _ = ask.waiter.send(Err(ClientError::Closed));
                    return Ok(());
                }
                // Not ours: the daemon says so (`not-pending`).
                None => encode(&ClientFrame::AskUserCancel {
                    correlation_id,
                    reason: None,
                    via: None,
                }),
            };
            (writer, frame)
        };
        let Some(writer) = writer else {
            return Err(ClientError::Closed);
        };
        writer.lock().await.send(frame).await?;
        Ok(())
    }
}

/// Connects and says hello; takes the daemon's timeouts from its welcome.
async fn dial(shared: &Shared) -> Result<Connection, ClientError> {
    let mut conn = Connection::connect(&shared.path).await?;
    let welcome = conn.hello(shared.client.as_deref()).await?;
    if let ServerFrame::Welcome {
        default_timeout_ms,
        max_timeout_ms,
        ..
    } = welcome
    {
        let mut st = shared.state();
        st.default_timeout_ms = default_timeout_ms;
        st.max_timeout_ms = max_timeout_ms;
    }
    Ok(conn)
}

/// Makes `conn` the live connection: starts its reader and resends every question asked
/// while no daemon held it (none on the first connection).
fn attach(shared: &Arc<Shared>, conn: Connection) {
    let (reader, writer) = conn.into_split();
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    let now = Instant::now();
    let mut st = shared.state();
    st.gen += 1;
    let gen = st.gen;
    st.writer = Some(writer.clone());
    let resend: Vec<bytes::Bytes> = st
        .asks
        .iter_mut()
        .map(|(id, ask)| {
            ask.sends += 1;
            ask.frame(id, now)
        })
        .collect();
    let me = shared.clone();
    st.tasks.retain(|t| !t.is_finished());
    st.tasks.push(tokio::spawn(async move {
        if !resend.is_empty() {
            let mut w = writer.lock().await;
            for frame in resend {
                if w.send(frame).await.is_err() {
                    break;
                }
            }
        }
    }));
    let me2 = me.clone();
    st.tasks.push(tokio::spawn(read(me2, reader, gen)));
    drop(me);
}

/// Hands each response to its `ask`, until the connection drops.
async fn read(
    shared: Arc<Shared>,
    mut reader: FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    gen: u64,
) {
    while let Some(Ok(payload)) = reader.next().await {
        let Ok(frame) = serde_json::from_slice::<ServerFrame>(&payload) else {
            continue;
        };
        match frame {
            ServerFrame::AskUserResponse(r) => {
                let id = r.correlation_id.clone();
                on_response(&shared, id, Terminal::Question(r))
            }
            ServerFrame::ToolConfirmationResponse(r) => {
                let id = r.correlation_id.clone();
                on_response(&shared, id, Terminal::Approval(r))
            }
            ServerFrame::Error(e) => {
                let Some(id) = e.correlation_id.clone() else {
                    continue;
                };
                let mut st = shared.state();
                let Some(ask) = st.asks.get_mut(&id) else {
                    continue;
                };
                let transient = e.code == ErrorCode::StoreUnavailable;
                if (e.code == ErrorCode::DuplicateCorrelationId && ask.sends > 1) || transient {
                    // The copy the dropped connection left is still pending there, or the
                    // daemon's store cannot write for now: ask again on the backoff, within
                    // the ask's own timeout.
                    let delay = ask.dup_backoff.next_delay();
                    let me = shared.clone();
                    st.tasks.push(tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        resend(&me, &id, gen).await;
                    }));
                    continue;
                }
                let ask = st.asks.remove(&id).expect("just found");
                let _ = ask.waiter.send(Err(ClientError::Rejected(e)));
            }
            _ => {}
        }
    }
    lost(&shared, Some(gen));
}

fn on_response(shared: &Shared, id: String, r: Terminal) {
    let mut st = shared.state();
    let Some(ask) = st.asks.get_mut(&id) else {
        return;
    };
    if r.reason() == Outcome::Shutdown && shared.reconnect && !ask.cancel_requested {
        // The daemon is stopping: ask the next one, if one comes before the deadline.
        ask.shutdown_response = Some(r);
        return;
    }
    let ask = st.asks.remove(&id).expect("just found");
    let _ = ask.waiter.send(Ok(r));
}

/// Sends question `id` again on connection `gen`, if both are still current.
async fn resend(shared: &Arc<Shared>, id: &str, gen: u64) {
    let (writer, frame) = {
        let mut st = shared.state();
        if st.gen != gen {
            return; // A newer connection resent it already.
        }
        let Some(writer) = st.writer.clone() else {
            return;
        };
        let now = Instant::now();
        let Some(ask) = st.asks.get_mut(id) else {
            return;
        };
        ask.sends += 1;
        (writer, ask.frame(id, now))
    };
    let _ = writer.lock().await.send(frame).await;
}

/// The connection of generation `gen` (or the live one, for `None`) is gone.
fn lost(shared: &Arc<Shared>, gen: Option<u64>) {
    let mut st = shared.state();
    if gen.is_some_and(|g| g != st.gen) {
        return;
    }
    st.writer = None;
    if !shared.reconnect {
        for (_, ask) in st.asks.drain() {
            let _ = ask.waiter.send(Err(ClientError::Closed));
        }
        return;
    }
    if st.asks.is_empty() || st.reconnecting {
        return; // The next ask reconnects; or a reconnection is already under way.
    }
    st.reconnecting = true;
    let me = shared.clone();
    st.tasks.retain(|t| !t.is_finished());
    st.tasks.push(tokio::spawn(reconnect(me)));
}

/// Connects again on the backoff policy while questions wait; ends each one whose deadline
/// passes meanwhile.
async fn reconnect(shared: Arc<Shared>) {
    let mut backoff = shared.backoff.clone();
    loop {
        let earliest = {
            let mut st = shared.state();
            let now = Instant::now();
            let expired: Vec<String> = st
                .asks
                .iter()
                .filter(|(_, a)| a.deadline <= now)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                let ask = st.asks.remove(&id).expect("listed above");
                let result = match ask.shutdown_response {
                    Some(r) => Ok(r),
                    None => Err(ClientError::Unreachable {
                        path: shared.path.clone(),
                    }),
                };
                let _ = ask.waiter.send(result);
            }
            if st.asks.is_empty() {
                st.reconnecting = false;
                return;
            }
            st.asks
                .values()
                .map(|a| a.deadline)
                .min()
                .expect("not empty")
        };
        match dial(&shared).await {
            Ok(conn) => {
                shared.state().reconnecting = false;
                attach(&shared, conn);
                return;
            }
            Err(e @ ClientError::Untrusted(_)) => {
                let mut st = shared.state();
                st.reconnecting = false;
                let why = e.to_string();
                for (_, ask) in st.asks.drain() {
                    let _ = ask.waiter.send(Err(ClientError::Protocol(why.clone())));
                }
                return;
            }
            Err(_) => {
                let pause = backoff.next_delay();
                let until = earliest.saturating_duration_since(Instant::now());
                tokio::time::sleep(pause.min(until)).await;
            }
        }
    }
}
