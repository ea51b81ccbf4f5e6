//! Callback data for chat buttons, bound to what was shown. A button carries
//! `base64url(handle ‖ version ‖ action ‖ arg ‖ tag)` (24 bytes, 32 characters: within
//! Telegram's 64-byte `callback_data`, Slack's `value` and Discord's `custom_id`):
//!
//! - `handle` (6 bytes) names the request: the first bytes of HMAC(key, id, digest), so a
//!   restarted `askbus chat` finds the same handle, and a reused correlationId whose request
//!   shows something else (another digest) is another handle;
//! - `version` (2 bytes) is the card's version when the button was drawn: a tap from an older
//!   message state (a replayed toggle, a stale keyboard) is refused;
//! - `action`, `arg`: what the button does (`card::Action`);
//! - `tag` (14 bytes): HMAC(key, id, digest, handle, version, action, arg), compared in
//!   constant time, so nobody without the key (which never leaves this machine) can make or
//!   alter a button.
//!
//! The digest is the request's `shownSha256` (`askbus::protocol::shown`): SHA-256 of the
//! RFC 8785 JSON of what the UI was shown (correlationId, kind, questions or tool call and
//! details, context).

use askbus::protocol::shown::shown_sha256;
use askbus::protocol::{UiApproval, UiRequest};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;

use crate::links::LinkKey;

pub const HANDLE_BYTES: usize = 6;
const TAG_BYTES: usize = 14;
const RAW_BYTES: usize = HANDLE_BYTES + 2 + 2 + TAG_BYTES;
/// The longest callback data we make (Telegram's limit is 64 bytes).
pub const DATA_CHARS: usize = RAW_BYTES.div_ceil(3) * 4;

/// Names a request in callback data.
pub type Handle = [u8; HANDLE_BYTES];

/// What a button's data says, before its tag is checked against the request it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub handle: Handle,
    pub version: u16,
    pub action: u8,
    pub arg: u8,
    tag: [u8; TAG_BYTES],
}

pub struct Sealer {
    key: LinkKey,
}

impl Sealer {
    pub fn new(key: LinkKey) -> Sealer {
        Sealer { key }
    }

    pub fn handle(&self, id: &str, digest: &str) -> Handle {
        let t = self
            .key
            .tag(&[b"askbus-chat handle", id.as_bytes(), digest.as_bytes()]);
        t[..HANDLE_BYTES].try_into().expect("6 of 32 bytes")
    }

    fn tag(&self, id: &str, digest: &str, o: &Opened) -> [u8; TAG_BYTES] {
        let t = self.key.tag(&[
            b"askbus-chat button",
            id.as_bytes(),
            digest.as_bytes(),
            &o.handle,
            &o.version.to_be_bytes(),
            &[o.action, o.arg],
        ]);
        t[..TAG_BYTES].try_into().expect("14 of 32 bytes")
    }

    /// The data of a button of request `id` (showing `digest`) at card `version`.
    pub fn seal(&self, id: &str, digest: &str, version: u16, (action, arg): (u8, u8)) -> String {
        let mut o = Opened {
            handle: self.handle(id, digest),
            version,
            action,
            arg,
            tag: [0; TAG_BYTES],
        };
        o.tag = self.tag(id, digest, &o);
        let mut raw = Vec::with_capacity(RAW_BYTES);
        raw.extend_from_slice(&o.handle);
        raw.extend_from_slice(&version.to_be_bytes());
        raw.extend_from_slice(&[action, arg]);
        raw.extend_from_slice(&o.tag);
        B64.encode(raw)
    }

    /// Reads data without trusting it: `None` when it is not data of ours at all.
    pub fn open(data: &str) -> Option<Opened> {
        if data.len() != DATA_CHARS {
            return None;
        }
        let raw = B64.decode(data).ok()?;
        let raw: [u8; RAW_BYTES] = raw.try_into().ok()?;
        Some(Opened {
            handle: raw[..6].try_into().ok()?,
            version: u16::from_be_bytes([raw[6], raw[7]]),
            action: raw[8],
            arg: raw[9],
            tag: raw[10..].try_into().ok()?,
        })
    }

    /// Whether `o` was sealed by this key for request `id` showing `digest`.
    pub fn verify(&self, id: &str, digest: &str, o: &Opened) -> bool {
        if self.handle(id, digest) != o.handle {
            return false;
        }
        let want = self.tag(id, digest, o);
        want.iter()
            .zip(o.tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// The request's `shownSha256` (the one digest links, chat buttons and the history bind).
pub fn question_digest(r: &UiRequest) -> String {
    shown_sha256(&r.shown())
}

/// The same for an approval.
pub fn approval_digest(a: &UiApproval) -> String {
    shown_sha256(&a.shown())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(b: u8) -> Sealer {
        Sealer::new(LinkKey::from_bytes([b; 32]))
    }

    #[test]
    fn sealed_data_fits_and_verifies() {
        let s = sealer(1);
        let d = s.seal("req-1", "abc", 7, (b'p', 2));
        assert_eq!(d.len(), DATA_CHARS);
        assert!(d.len() <= 64);
        let o = Sealer::open(&d).unwrap();
        assert_eq!((o.version, o.action, o.arg), (7, b'p', 2));
        assert!(s.verify("req-1", "abc", &o));
        // Another request, another digest (a reused id), another key: refused.
        assert!(!s.verify("req-2", "abc", &o));
        assert!(!s.verify("req-1", "abd", &o));
        assert!(!sealer(2).verify("req-1", "abc", &o));
        // A changed choice keeps the tag: refused.
        let mut raw = B64.decode(&d).unwrap();
        raw[9] = 3;
        let forged = Sealer::open(&B64.encode(raw)).unwrap();
        assert!(!s.verify("req-1", "abc", &forged));
        assert!(Sealer::open("garbage").is_none());
    }
}
