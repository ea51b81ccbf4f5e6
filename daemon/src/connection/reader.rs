//! Reading frames off a connection's socket: whole frames are handed out straight from a
//! per-thread buffer, a frame split across reads is kept (and timed) until it is whole, and a
//! length prefix past the limit stops reading.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::net::UnixStream;
use tokio::time::{Duration, Instant};

use super::ConnectionConfig;
use crate::protocol::{split_frame, Split, LENGTH_PREFIX_BYTES};

/// What a frame's handler tells the reader.
pub(super) enum Next {
    Continue,
    /// Stop reading and close: the frame's error frame is queued.
    Close,
}

/// What reading gave.
pub(super) enum Read {
    /// Frames were handled (or none were complete yet): keep reading.
    More,
    /// The socket failed, or the peer shut its side in the middle of a frame (which is
    /// dropped).
    Closed,
    /// The peer shut its write side at a frame boundary; it may still be reading.
    Eof,
    /// A frame's handling asked to close the connection (its error frame is queued).
    CloseOnError,
    /// The length prefix exceeded the limit.
    TooLarge,
    /// A frame was started but not finished within the partial-frame deadline.
    Stalled,
}

/// How much one read takes off the socket: the most frames one burst handles before its
/// output is written.
const READ_BYTES: usize = 16 * 1024;

/// Reads frames off the socket and bounds how long a started frame may take, so a peer
/// trickling bytes (or stopping mid-frame) cannot hold a buffer forever. Whole frames are
/// handled straight from a per-thread buffer; only a frame split across reads is kept on the
/// heap, so an idle connection holds no read buffer and costs no timer.
pub(super) struct FrameReader {
    stream: Arc<UnixStream>,
    /// The start of a frame that did not arrive whole; empty (and unallocated) otherwise.
    partial: BytesMut,
    max_frame_bytes: usize,
    timeout: Duration,
    /// When the frame now in `partial` began arriving.
    partial_since: Option<Instant>,
}

impl FrameReader {
    pub(super) fn new(stream: Arc<UnixStream>, config: &ConnectionConfig) -> Self {
        FrameReader {
            stream,
            partial: BytesMut::new(),
            max_frame_bytes: config.max_frame_bytes,
            timeout: config.frame_timeout,
            partial_since: None,
        }
    }

    /// Waits until the socket has input, or until a started frame's deadline. Cancel-safe.
    pub(super) async fn readable(&self) -> Result<(), Read> {
        let ready = match self.partial_since {
            None => self.stream.readable().await,
            Some(since) => {
                let deadline = since + self.timeout;
                match tokio::time::timeout_at(deadline, self.stream.readable()).await {
                    Ok(ready) => ready,
                    Err(_) => return Err(Read::Stalled),
                }
            }
        };
        ready.map_err(|_| Read::Closed)
    }

    /// Reads what the socket has (once) and hands every whole frame to `on_frame`, in order.
    pub(super) fn read_ready(&mut self, mut on_frame: impl FnMut(&[u8]) -> Next) -> Read {
        if !self.partial.is_empty() {
            return self.continue_partial(&mut on_frame);
        }
        thread_local! {
            // Shared by every connection this thread serves: whole frames are handled straight
            // from it, and it is never zeroed (reads go into its spare capacity).
            static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(READ_BYTES));
        }
        SCRATCH.with(|scratch| {
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                // Only a frame handler that itself read a socket could get here.
                return self.read_ready_into(&mut Vec::with_capacity(READ_BYTES), &mut on_frame);
            };
            scratch.clear();
            self.read_ready_into(&mut scratch, &mut on_frame)
        })
    }

    fn read_ready_into(
        &mut self,
        scratch: &mut Vec<u8>,
        on_frame: &mut impl FnMut(&[u8]) -> Next,
    ) -> Read {
        match self.stream.try_read_buf(scratch) {
            Ok(0) => return Read::Eof,
            Ok(_) => {}
            Err(e) if is_retry(&e) => return Read::More,
            Err(_) => return Read::Closed,
        }
        let rest = match each_frame(scratch, self.max_frame_bytes, on_frame) {
            Ok(taken) => &scratch[taken..],
            Err(read) => return read,
        };
        if !rest.is_empty() {
            self.partial.extend_from_slice(rest);
            self.partial_since = Some(Instant::now());
        }
        Read::More
    }

    fn continue_partial(&mut self, on_frame: &mut impl FnMut(&[u8]) -> Next) -> Read {
        // Room for the rest of the frame (its length is checked before anything is reserved
        // for it), or for a prefix and a bit.
        let missing = match split_frame(&self.partial, self.max_frame_bytes) {
            Split::TooLarge => return Read::TooLarge,
            Split::Frame(_) => 0,
            Split::Incomplete => match self.partial.first_chunk::<LENGTH_PREFIX_BYTES>() {
                Some(prefix) => {
                    LENGTH_PREFIX_BYTES + u32::from_be_bytes(*prefix) as usize - self.partial.len()
                }
                None => LENGTH_PREFIX_BYTES - self.partial.len(),
            },
        };
        if missing > 0 {
            self.partial.reserve(missing.max(READ_BYTES));
            match self.stream.try_read_buf(&mut self.partial) {
                Ok(0) => return Read::Closed,
                Ok(_) => {}
                Err(e) if is_retry(&e) => return Read::More,
                Err(_) => return Read::Closed,
            }
        }
        let taken = match each_frame(&self.partial, self.max_frame_bytes, on_frame) {
            Ok(taken) => taken,
            Err(read) => return read,
        };
        self.partial.advance(taken);
        let completed = taken > 0;
        if self.partial.is_empty() {
            // Free the frame's memory: an idle connection holds no buffer.
            self.partial = BytesMut::new();
            self.partial_since = None;
        } else if completed {
            // Whatever follows is the start of the next frame, starting now.
            self.partial_since = Some(Instant::now());
        }
        Read::More
    }
}

/// Hands every whole frame at the front of `buf` to `on_frame`, in order: the bytes they took,
/// or why reading stops (`CloseOnError` from a handler, `TooLarge` from a prefix).
fn each_frame(
    buf: &[u8],
    max_frame_bytes: usize,
    on_frame: &mut impl FnMut(&[u8]) -> Next,
) -> Result<usize, Read> {
    let mut taken = 0;
    loop {
        match split_frame(&buf[taken..], max_frame_bytes) {
            Split::Frame(len) => {
                let start = taken + LENGTH_PREFIX_BYTES;
                taken = start + len;
                if let Next::Close = on_frame(&buf[start..taken]) {
                    return Err(Read::CloseOnError);
                }
            }
            Split::TooLarge => return Err(Read::TooLarge),
            Split::Incomplete => return Ok(taken),
        }
    }
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
