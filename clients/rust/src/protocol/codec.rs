//! Framing: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

use std::cell::RefCell;

use bytes::Bytes;
use serde::Serialize;
#[cfg(feature = "codec")]
use tokio_util::codec::LengthDelimitedCodec;

/// The daemon's default cap on one frame's payload (1 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 1_048_576;

/// Size of the length prefix in front of every frame.
pub const LENGTH_PREFIX_BYTES: usize = 4;

#[cfg(feature = "codec")]
/// The codec every askbus peer uses. The length is checked against `max_frame_bytes` before any
/// buffer for the payload is allocated, so a hostile prefix cannot make a peer allocate.
pub fn codec(max_frame_bytes: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .big_endian()
        .length_field_length(LENGTH_PREFIX_BYTES)
        .max_frame_length(max_frame_bytes)
        .new_codec()
}

/// What the front of a buffer of received bytes holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// A whole frame whose payload is this long (the frame takes the prefix and the payload).
    Frame(usize),
    /// Not yet a whole frame.
    Incomplete,
    /// A length prefix above the limit: the stream cannot be resynchronized.
    TooLarge,
}

/// Finds the first frame in `buf`, as [`codec`] would: a payload of up to `max_frame_bytes`.
pub fn split_frame(buf: &[u8], max_frame_bytes: usize) -> Split {
    let Some(prefix) = buf.first_chunk::<LENGTH_PREFIX_BYTES>() else {
        return Split::Incomplete;
    };
    let len = u32::from_be_bytes(*prefix) as usize;
    if len > max_frame_bytes {
        Split::TooLarge
    } else if buf.len() - LENGTH_PREFIX_BYTES >= len {
        Split::Frame(len)
    } else {
        Split::Incomplete
    }
}

/// Serializes one frame's JSON payload (without the length prefix, which the codec adds).
pub fn encode<T: Serialize + ?Sized>(frame: &T) -> Bytes {
    encode_with(|buf| {
        // Serializing our own frame types cannot fail: they hold no maps with non-string keys
        // and no types whose Serialize impl errors.
        serde_json::to_writer(buf, frame).expect("protocol frames always serialize")
    })
}

/// One frame's JSON payload as `write` writes it, copied out at its exact size.
pub fn encode_with(write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    thread_local! {
        // Kept across frames so serializing grows no vector: each frame is written here and
        // copied out once, at its exact size. A queued frame with spare capacity would let a
        // connection queue bounded at N bytes of frames hold more than N of memory.
        static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            // Only a writer that itself encodes a frame could get here.
            let mut own = Vec::new();
            write(&mut own);
            return Bytes::from(own);
        };
        buf.clear();
        write(&mut buf);
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

#[cfg(feature = "codec")]
/// Whether a codec error means the peer announced a frame longer than the limit.
pub fn is_frame_too_large(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>())
}

#[cfg(all(test, feature = "codec"))]
mod tests {
    use super::*;
    use tokio_util::codec::Decoder;

    #[test]
    fn split_frame_agrees_with_the_codec() {
        let cases: &[&[u8]] = &[
            b"",
            b"\0\0",
            b"\0\0\0\0",
            b"\0\0\0\x02{}",
            b"\0\0\0\x02{",
            b"\0\0\0\x02{}\0\0\0\x01",
            b"\0\0\0\x11{\"type\":\"ping\"}",
            b"\0\0\0\x12{\"type\":\"ping\"}",
            b"\0\0\0\x13",
            b"\xff\xff\xff\xff",
        ];
        for &case in cases {
            let mut buf = bytes::BytesMut::from(case);
            let by_codec = match codec(0x11).decode(&mut buf) {
                Ok(Some(frame)) => Split::Frame(frame.len()),
                Ok(None) => Split::Incomplete,
                Err(e) if is_frame_too_large(&e) => Split::TooLarge,
                Err(e) => panic!("{e}"),
            };
            assert_eq!(split_frame(case, 0x11), by_codec, "{case:?}");
        }
    }
}
