//! Protocol v1 on the wire: framing, the frames peers exchange, and error codes.
//!
//! This module depends on nothing else in the crate, so clients, the daemon and tools can share
//! it, and the spec in `proto/PROTOCOL.md` can be checked against one place.

mod approval;
mod codec;
mod error;
mod fast;
mod frames;
pub mod hot;

pub use approval::*;
pub use codec::{
    codec, encode, encode_with, is_frame_too_large, split_frame, Split, DEFAULT_MAX_FRAME_BYTES,
    LENGTH_PREFIX_BYTES,
};
pub use error::{ErrorCode, FrameError};
pub use fast::{parse_one_pass, OnePass, RequestHead};
pub use frames::*;

/// The protocol number carried by `hello` and `welcome`.
pub const PROTOCOL_VERSION: u64 = 1;

/// Longest accepted correlationId, in characters (Unicode scalar values).
pub const MAX_CORRELATION_ID_CHARS: usize = 128;
