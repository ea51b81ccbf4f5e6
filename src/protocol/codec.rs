//! Framing: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

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
    // Serializing our own frame types cannot fail: they hold no maps with non-string keys
    // and no types whose Serialize impl errors.
    let mut json = serde_json::to_vec(frame).expect("protocol frames always serialize");
    // The vector grew by doubling, so up to half of it may be spare; a queued frame would keep
    // that spare alive, and a connection queue bounded at N bytes of frames would hold up to
    // 2N of memory. Shrinking in place gives the tail back to the allocator.
    json.shrink_to_fit();
    Bytes::from(json)
}

/// Whether a codec error means the peer announced a frame longer than the limit.
pub fn is_frame_too_large(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>())
}
