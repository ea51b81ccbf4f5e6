//! Protocol v1 on the wire: framing, the frames peers exchange, and error codes.
//!
//! This module depends on nothing else in the crate, so clients, the daemon and tools can share
//! it, and the spec in `proto/PROTOCOL.md` can be checked against one place.
//!
//! What a client uses: [`ClientFrame`] (what it sends), [`ServerFrame`] (what it receives),
//! [`ErrorCode`], [`encode`] and the codec. The rest is public for the daemon (`askbusd`), the
//! conformance tests and tools, which read frames as the daemon does:
//! - [`Inbound`] and [`parse_inbound`]: a frame a peer sent, as the reference parser
//!   ([`parse::reference`]) reads it; it decides every frame and words every error;
//! - [`shown`]: `shownSha256`, the digest of what a request showed (RFC 8785 canonical JSON).
//!
//! Behind the non-default feature `fast` (hidden from these docs: an optimisation for the
//! daemon and the fuzz targets, not part of the crate's promise): `parse::fast`, the fast
//! reader of the frames every question and approval costs; `encode_fast`, `UiRequestRef` and
//! `UiApprovalRef`, fast encoders of the frames they cost, whose reference is [`encode`] of the
//! same [`ServerFrame`]; `json`, the JSON string and integer writer those encoders share; and
//! `canonical`, the reader of JSON text already written as serde_json writes it, which the
//! approvals' fast path keeps as it came. Each yields exactly what its reference does.
//!
//! Internal dependencies form a DAG: `codec`, `error` ← `frames` ← `parse`; `json` ←
//! `encode_fast` → `frames`.

#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod canonical;
mod codec;
#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod encode_fast;
mod error;
mod frames;
#[cfg(feature = "fast")]
#[doc(hidden)]
pub mod json;
// Without `fast`, only `shown` writes JSON strings with it.
#[cfg(not(feature = "fast"))]
#[allow(dead_code)]
mod json;
pub mod parse;
pub mod shown;
pub mod time;

#[cfg(feature = "codec")]
pub use codec::{codec, is_frame_too_large};
pub use codec::{
    encode, encode_with, split_frame, Split, DEFAULT_MAX_FRAME_BYTES, LENGTH_PREFIX_BYTES,
};
pub use error::{Code, ErrorCode, FrameError, RequestKind};
pub use frames::*;
#[cfg(feature = "fast")]
#[doc(hidden)]
pub use parse::fast::{parse_fast, ApprovalFields, FastFrame, RequestHead};
pub use parse::parse_inbound;
#[cfg(feature = "shown")]
pub use shown::shown_sha256;
pub use shown::{canonical_json, shown_json, Shown};

/// The protocol number carried by `hello` and `welcome`.
pub const PROTOCOL_VERSION: u64 = 1;

/// Longest accepted correlationId, in characters (Unicode scalar values).
pub const MAX_CORRELATION_ID_CHARS: usize = 128;
