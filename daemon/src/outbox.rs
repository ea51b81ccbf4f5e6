//! One connection's outbound side: a byte buffer of length-prefixed frames, bounded in bytes,
//! that is written straight to the socket by whichever task finishes a batch of work. Nothing
//! is handed to another task per frame: a frame costs a copy into the buffer, and a batch of
//! frames one `write` per peer it touched. Only what the socket would not take at once is
//! left to the connection's own task, which waits for the socket to become writable.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::UnixStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::protocol::LENGTH_PREFIX_BYTES;

/// A drained buffer larger than this is freed rather than kept for the next frames, so one
/// burst (a replay, a huge frame) does not pin its size on an idle connection.
const KEPT_CAPACITY: usize = 16 * 1024;

/// The sending side of one connection, shared by everyone who delivers to it. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct Outbox {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    stream: Arc<UnixStream>,
    state: Mutex<State>,
    limit: usize,
    /// Wakes the connection's task: the socket was full (the task finishes the write), or a
    /// replay step is due.
    wake: Notify,
    /// Cancelled when the connection must be dropped at once (its queue overflowed).
    cancel: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    /// Frames not yet written, from `sent` on.
    buf: Vec<u8>,
    sent: usize,
    /// Some batch has this outbox on its list and will flush it.
    scheduled: bool,
    /// The socket took less than it was given: the connection's task writes the rest once the
    /// socket is writable, and until then flushing is left to it.
    stalled: bool,
    /// A write failed: the peer is gone. Nothing more is queued.
    closed: bool,
    /// The UI has more of the pending table to receive, once its buffer has room.
    replay: bool,
    /// The next replayed frame is larger than the room left: the step waits until everything
    /// queued is written (an empty buffer takes any frame), so a frame near the limit is
    /// delayed, never refused and never starved.
    replay_drained: bool,
    /// A half-closed peer has nothing more to receive: the connection closes once what is
    /// queued is written.
    finished: bool,
}

impl State {
    fn unsent(&self) -> usize {
        self.buf.len() - self.sent
    }

    /// Room for a replay step: the buffer is at most half full (empty, when the next frame
    /// needs more than the rest).
    fn has_room_for_replay(&self, limit: usize) -> bool {
        if self.replay_drained {
            self.unsent() == 0
        } else {
            self.unsent() < limit / 2
        }
    }

    /// Writes what the socket takes now. `Ok(true)` when everything was written.
    fn write_now(&mut self, stream: &UnixStream) -> io::Result<bool> {
        while self.sent < self.buf.len() {
            match stream.try_write(&self.buf[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.sent = 0;
        if self.buf.capacity() > KEPT_CAPACITY {
            self.buf = Vec::new();
        }
        Ok(true)
    }

    fn fail(&mut self) {
        self.closed = true;
        self.stalled = false;
        self.buf = Vec::new();
        self.sent = 0;
    }
}

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The unsent bytes would exceed the limit: the peer does not read.
    Full,
    /// A write failed earlier: the peer went away.
    Closed,
}

impl Outbox {
    /// An outbox for `stream` holding at most `limit_bytes` of unsent frames.
    pub fn new(stream: Arc<UnixStream>, limit_bytes: usize) -> Outbox {
        Outbox {
            shared: Arc::new(Shared {
                stream,
                state: Mutex::new(State::default()),
                limit: limit_bytes,
                wake: Notify::new(),
                cancel: CancellationToken::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned buffer is still the best there is.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// Cancelled when the connection must be dropped at once.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.shared.cancel
    }

    /// Drops the connection: its task stops serving it.
    pub fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// Queues one frame's JSON payload (the length prefix is added here) and puts this outbox
    /// on `batch`, which writes it when the batch ends. One frame always fits an empty buffer,
    /// whatever its size.
    pub fn push(&self, payload: &[u8], batch: &mut Batch) -> Result<(), Refused> {
        let mut st = self.state();
        if st.closed {
            return Err(Refused::Closed);
        }
        let unsent = st.unsent();
        let len = LENGTH_PREFIX_BYTES + payload.len();
        if unsent > 0 && unsent + len > self.shared.limit {
            return Err(Refused::Full);
        }
        if st.sent > 0 && st.sent >= st.buf.len() / 2 {
            // Reclaim what was written before the buffer has to grow.
            let sent = st.sent;
            st.buf.drain(..sent);
            st.sent = 0;
        }
        let prefix = u32::try_from(payload.len()).expect("frames are shorter than 4 GiB");
        st.buf.extend_from_slice(&prefix.to_be_bytes());
        st.buf.extend_from_slice(payload);
        if !st.scheduled && !st.stalled {
            st.scheduled = true;
            drop(st);
            batch.outboxes.push(self.clone());
        }
        Ok(())
    }

    /// Writes what is queued, as far as the socket takes it without waiting; the rest is left
    /// to the connection's task.
    fn flush(&self) {
        let mut st = self.state();
        st.scheduled = false;
        if st.stalled || st.closed || st.unsent() == 0 {
            return;
        }
        match st.write_now(&self.shared.stream) {
            Ok(true) => {}
            Ok(false) => {
                st.stalled = true;
                drop(st);
                self.shared.wake.notify_one();
            }
            Err(_) => st.fail(),
        }
    }

    /// Whether a write failed (the peer went away), as opposed to the peer not reading.
    pub fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// Unsent bytes.
    pub fn queued_bytes(&self) -> usize {
        self.state().unsent()
    }

    /// Asks the connection's task for a replay step once the buffer has room.
    pub fn want_replay(&self) {
        self.state().replay = true;
        self.shared.wake.notify_one();
    }

    /// Whether the buffer has room for a replay step: at most half full.
    pub fn has_room_for_replay(&self) -> bool {
        self.state().has_room_for_replay(self.shared.limit)
    }

    /// What one replay step may queue: `(step, room)`. A step adds at most `step` bytes (half
    /// the limit; a step starts only below half, so replayed frames alone never pass the
    /// limit), except that a first frame larger than that goes alone when it fits in `room`,
    /// what the buffer takes now (`usize::MAX` when it is empty: an empty buffer takes any
    /// frame).
    pub fn replay_budget(&self) -> (usize, usize) {
        let unsent = self.state().unsent();
        let room = if unsent == 0 {
            usize::MAX
        } else {
            self.shared.limit.saturating_sub(unsent)
        };
        (self.shared.limit / 2, room)
    }

    /// Asks for the next replay step once everything queued is written: its next frame did
    /// not fit in the room left.
    pub fn want_replay_drained(&self) {
        let mut st = self.state();
        st.replay = true;
        st.replay_drained = true;
        drop(st);
        self.shared.wake.notify_one();
    }

    /// Whether a replay step is due now: one was asked for and the buffer is at most half full
    /// (or the peer is gone, which the step's frames find out, dropping the peer).
    pub fn take_replay(&self) -> bool {
        let mut st = self.state();
        if st.replay && st.has_room_for_replay(self.shared.limit) {
            st.replay = false;
            st.replay_drained = false;
            return true;
        }
        false
    }

    /// Tells the connection's task that its half-closed peer has nothing more to receive.
    pub fn finish(&self) {
        self.state().finished = true;
        self.shared.wake.notify_one();
    }

    /// Whether [`Outbox::finish`] was called.
    pub fn is_finished(&self) -> bool {
        self.state().finished
    }

    /// Whether the connection's task must finish a write.
    pub fn is_stalled(&self) -> bool {
        self.state().stalled
    }

    /// Woken when the task has something to do (`is_stalled`, `take_replay`). Cancel-safe; a
    /// wake-up sent while nobody waits is kept for the next call.
    pub async fn woken(&self) {
        self.shared.wake.notified().await
    }

    /// For the connection's task while stalled: waits until the socket is writable and writes
    /// what it takes. Cancel-safe. An error means the peer is gone.
    pub async fn write_stalled(&self) -> io::Result<()> {
        loop {
            self.shared.stream.writable().await?;
            let mut st = self.state();
            if !st.stalled {
                return Ok(());
            }
            match st.write_now(&self.shared.stream) {
                Ok(true) => {
                    st.stalled = false;
                    return Ok(());
                }
                // Readiness was stale; wait again.
                Ok(false) => {}
                Err(e) => {
                    st.fail();
                    return Err(e);
                }
            }
        }
    }

    /// Writes everything queued, waiting as long as it takes (bound it with a timeout): for a
    /// connection's last frames before it closes.
    pub async fn drain(&self) -> io::Result<()> {
        loop {
            {
                let mut st = self.state();
                if st.closed {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                match st.write_now(&self.shared.stream) {
                    Ok(true) => {
                        st.stalled = false;
                        return Ok(());
                    }
                    Ok(false) => st.stalled = true,
                    Err(e) => {
                        st.fail();
                        return Err(e);
                    }
                }
            }
            self.shared.stream.writable().await?;
        }
    }
}

/// The outboxes a batch of work has queued frames on; flushing writes each once. A task that
/// handles several frames in a row flushes after the last, so a burst costs one write per peer.
#[derive(Debug, Default)]
pub struct Batch {
    outboxes: Vec<Outbox>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    pub fn is_empty(&self) -> bool {
        self.outboxes.is_empty()
    }

    /// Writes every outbox on the list (without waiting on any socket) and empties it.
    pub fn flush(&mut self) {
        for outbox in self.outboxes.drain(..) {
            outbox.flush();
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // A scheduled outbox counts on its batch to write it.
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn pair(limit: usize) -> (Outbox, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Outbox::new(Arc::new(a), limit), b)
    }

    async fn read_frame(peer: &mut UnixStream) -> Vec<u8> {
        let len = peer.read_u32().await.unwrap() as usize;
        let mut payload = vec![0; len];
        peer.read_exact(&mut payload).await.unwrap();
        payload
    }

    #[tokio::test]
    async fn frames_are_written_when_the_batch_flushes() {
        let (ob, mut peer) = pair(1 << 20).await;
        let mut batch = Batch::new();
        ob.push(b"one", &mut batch).unwrap();
        ob.push(b"two", &mut batch).unwrap();
        // The outbox is on the batch once, however many frames it got.
        assert_eq!(batch.outboxes.len(), 1);
        assert_eq!(ob.queued_bytes(), 14);
        batch.flush();
        assert_eq!(ob.queued_bytes(), 0);
        assert_eq!(read_frame(&mut peer).await, b"one");
        assert_eq!(read_frame(&mut peer).await, b"two");
    }

    #[tokio::test]
    async fn bounded_in_bytes_but_takes_one_frame_of_any_size() {
        let (ob, _peer) = pair(100).await;
        let mut batch = Batch::new();
        assert_eq!(ob.push(&[b'x'; 500], &mut batch), Ok(()));
        assert_eq!(ob.push(b"y", &mut batch), Err(Refused::Full));
        batch.flush();
        // The socket took it all: the buffer is empty again.
        assert_eq!(ob.queued_bytes(), 0);
        assert_eq!(ob.push(&[b'z'; 56], &mut batch), Ok(()));
        assert_eq!(ob.push(&[b'z'; 36], &mut batch), Ok(()));
        assert_eq!(ob.push(b"!", &mut batch), Err(Refused::Full));
        assert_eq!(ob.queued_bytes(), 100);
    }

    #[tokio::test]
    async fn what_the_socket_will_not_take_is_left_to_the_connection_task() {
        let (ob, mut peer) = pair(64 << 20).await;
        let mut batch = Batch::new();
        // Far more than a Unix socket buffers: the flush stalls.
        let big = vec![b'a'; 4 << 20];
        ob.push(&big, &mut batch).unwrap();
        batch.flush();
        assert!(ob.is_stalled());
        // Frames queued while stalled go behind, and no batch schedules them.
        ob.push(b"after", &mut batch).unwrap();
        assert!(batch.is_empty());
        let writer = tokio::spawn({
            let ob = ob.clone();
            async move {
                while ob.is_stalled() {
                    ob.write_stalled().await.unwrap();
                }
            }
        });
        assert_eq!(read_frame(&mut peer).await.len(), big.len());
        assert_eq!(read_frame(&mut peer).await, b"after");
        writer.await.unwrap();
        assert_eq!(ob.queued_bytes(), 0);
    }

    #[tokio::test]
    async fn a_peer_gone_refuses_further_frames() {
        let (ob, peer) = pair(1 << 20).await;
        drop(peer);
        let mut batch = Batch::new();
        ob.push(b"lost", &mut batch).unwrap();
        batch.flush();
        assert!(ob.is_closed());
        assert_eq!(ob.push(b"more", &mut batch), Err(Refused::Closed));
    }

    #[tokio::test]
    async fn replay_steps_wait_for_room() {
        let (ob, _peer) = pair(100).await;
        ob.want_replay();
        ob.woken().await;
        assert!(ob.take_replay());
        assert!(!ob.take_replay(), "one step per request");
        let mut batch = Batch::new();
        ob.push(&[b'x'; 60], &mut batch).unwrap();
        ob.want_replay();
        assert!(!ob.take_replay(), "the buffer is over half full");
        batch.flush();
        assert!(ob.take_replay());
    }
}
