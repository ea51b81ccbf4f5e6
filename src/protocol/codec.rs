//! Framing: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

use std::cell::RefCell;

use bytes::Bytes;
use serde::Serialize;
use tokio_util::codec::LengthDelimitedCodec;

/// The daemon's default cap on one frame's payload (1 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 1_048_576;

/// Size of the length prefix in front of every frame.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// The codec every askbus peer uses. The length is checked against `max_frame_bytes` before any
/// buffer for the payload is allocated, so a hostile prefix cannot make a peer allocate.
pub fn codec(max_frame_bytes: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .big_endian()
        .length_field_length(LENGTH_PREFIX_BYTES)
        .max_frame_length(max_frame_bytes)
        .new_codec()
}

/// Serializes one frame's JSON payload (without the length prefix, which the codec adds).
pub fn encode<T: Serialize + ?Sized>(frame: &T) -> Bytes {
    thread_local! {
        // Kept across frames so serializing grows no vector: each frame is written here and
        // copied out once, at its exact size. A queued frame with spare capacity would let a
        // connection queue bounded at N bytes of frames hold more than N of memory.
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            // Only a Serialize impl that itself encodes a frame could get here.
            return Bytes::from(to_json(frame));
        };
        buf.clear();
        // Serializing our own frame types cannot fail: they hold no maps with non-string keys
        // and no types whose Serialize impl errors.
        serde_json::to_writer(&mut *buf, frame).expect("protocol frames always serialize");
        let bytes = Bytes::copy_from_slice(&buf);
        if buf.capacity() > SCRATCH_KEPT_BYTES {
            // One huge frame must not pin its size on this thread for good.
            *buf = Vec::new();
        }
        bytes
    })
}

/// The largest scratch buffer a thread keeps between frames.
const SCRATCH_KEPT_BYTES: usize = 64 * 1024;

fn to_json<T: Serialize + ?Sized>(frame: &T) -> Vec<u8> {
    serde_json::to_vec(frame).expect("protocol frames always serialize")
}

/// Whether a codec error means the peer announced a frame longer than the limit.
pub fn is_frame_too_large(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>())
}
