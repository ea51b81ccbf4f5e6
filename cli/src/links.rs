//! Signed links: a URL that answers one question with one answer (`/a/TOKEN`), or signs a
//! browser in to look at one question (`/o/TOKEN`), without the page's session. `askbus notify`
//! signs them into the notifications it pushes; `askbus web` verifies them. Both read the same
//! 32-byte key from a file only this user can read, so nothing but a holder of that key can make
//! a link that `askbus web` accepts.
//!
//! A token is `v1.<b64url(payload JSON)>.<b64url(HMAC-SHA256(key, "v1." + payload_b64))>`
//! (base64url without padding), the payload
//! `{"k":"answer"|"open","id":correlationId,"s":shownSha256,"a":answer-or-null,"exp":unix-seconds,
//! "n":nonce,"r"?:true}`. The answer is the response body a UI would send:
//! `{"answers":{"0":"Yes"}}` for a question, `{"outcome":"proceed_once"}` for an approval.
//! `s` binds the link to the request itself (proto/PROTOCOL.md, `shownSha256`): a request that
//! reuses the correlationId after this one ended shows something else, and the link refuses
//! it. `r` marks a link pushed redacted: its pages show nothing of the request's text. The
//! nonce makes every link distinct, so the verifier can keep the ones used (in a file, across
//! restarts) until they expire and refuse a replay. This module only signs and checks; single
//! use is the verifier's (it alone sees links being used).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The client name (then `/VERSION`) of the UI connection `askbus web` answers a link's
/// question on: bus events name it as the answering UI, so answers given from a notification
/// can be counted.
pub const ANSWERING_CLIENT: &str = "askbus-web-link";
/// The file name of the key beside the socket.
pub const KEY_FILE_NAME: &str = "web-links.key";
/// Bytes in a key: HMAC-SHA256's block-sized secret is far beyond guessing.
const KEY_BYTES: usize = 32;
/// Random bytes in a nonce.
#[cfg_attr(not(test), allow(dead_code))] // signing is askbus notify's
const NONCE_BYTES: usize = 16;
const VERSION: &str = "v1";

/// The key file when `--link-key` is not given: `web-links.key` beside the socket, so
/// `askbus web` and `askbus notify` of one bus find the same key, and another bus (another
/// `--socket`) has its own.
pub fn default_key_path(socket: &Path) -> PathBuf {
    match socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.join(KEY_FILE_NAME),
        None => PathBuf::from(KEY_FILE_NAME),
    }
}

/// `--link-key FILE` if given, else [`default_key_path`].
pub fn key_path(flag: Option<&Path>, socket: &Path) -> PathBuf {
    flag.map_or_else(|| default_key_path(socket), Path::to_owned)
}

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("link key {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "link key {path} is owned by uid {owner}, not by you (uid {uid}): someone else could \
         sign links; remove it, or give --link-key a file of your own"
    )]
    NotOwned { path: PathBuf, owner: u32, uid: u32 },
    #[error(
        "link key {path} is readable or writable by others (mode {mode:04o}): anyone who read \
         it can sign links; run `chmod 600 {path}` or remove it (links signed with it stop \
         working)"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("link key {path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("link key {path} holds {len} bytes, not {KEY_BYTES}: remove it and a new one is made")]
    WrongSize { path: PathBuf, len: u64 },
    #[error("cannot read the OS's random source: {0}")]
    Random(getrandom::Error),
}

/// Why a link is refused. Each says so to the person who followed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the link is not a valid askbus link (cut short or mistyped?)")]
    Malformed,
    #[error("the link is of a version this askbus does not know")]
    WrongVersion,
    #[error("the link's signature does not match: it was not made with this server's key")]
    BadSignature,
    #[error("the link has expired")]
    Expired,
    #[error("the link is for another action")]
    WrongKind,
}

/// What a link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// Answers the question with the link's answer (after a confirmation page).
    Answer,
    /// Signs the browser in and shows the question.
    Open,
}

/// A link's content, signed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    #[serde(rename = "k")]
    pub kind: LinkKind,
    /// The question's (or approval's) correlationId.
    pub id: String,
    /// `shownSha256` of the request the link was made for.
    #[serde(rename = "s")]
    pub shown: String,
    /// For [`LinkKind::Answer`]: the response body a UI would send; `None` for an open link.
    #[serde(rename = "a")]
    pub answer: Option<serde_json::Value>,
    /// Unix seconds after which the link is refused.
    #[serde(rename = "exp")]
    pub expires: u64,
    /// Random, so that every link is distinct and single use can be kept per link.
    #[serde(rename = "n")]
    pub nonce: String,
    /// Pushed redacted: the link's pages must not show the request's text either.
    #[serde(rename = "r", default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

#[cfg_attr(not(test), allow(dead_code))] // signing is askbus notify's
impl Link {
    /// A link answering request `id` (that showed `shown`) with `answer` (e.g.
    /// `{"answers":{"0":"Yes"}}`) until `expires` (Unix seconds).
    pub fn answer(
        id: &str,
        shown: &str,
        answer: serde_json::Value,
        expires: u64,
    ) -> Result<Link, KeyError> {
        Ok(Link {
            kind: LinkKind::Answer,
            id: id.to_owned(),
            shown: shown.to_owned(),
            answer: Some(answer),
            expires,
            nonce: nonce()?,
            redacted: false,
        })
    }

    /// A link showing request `id` (that showed `shown`), view only, until `expires`.
    pub fn open(id: &str, shown: &str, expires: u64) -> Result<Link, KeyError> {
        Ok(Link {
            kind: LinkKind::Open,
            id: id.to_owned(),
            shown: shown.to_owned(),
            answer: None,
            expires,
            nonce: nonce()?,
            redacted: false,
        })
    }

    /// The same link, marked as pushed redacted.
    pub fn redacted(mut self, redacted: bool) -> Link {
        self.redacted = redacted;
        self
    }
}

#[cfg_attr(not(test), allow(dead_code))] // signing is askbus notify's
fn nonce() -> Result<String, KeyError> {
    let mut bytes = [0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(KeyError::Random)?;
    Ok(B64.encode(bytes))
}

/// The current time in Unix seconds, as links count it.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The secret that signs and checks links.
pub struct LinkKey([u8; KEY_BYTES]);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(..)")
    }
}

impl LinkKey {
    /// Reads the key at `path`, or makes one there if there is none (whoever needs it first:
    /// `askbus web` or `askbus notify`). The file must be a regular file of this user's,
    /// readable by nobody else; a new one is written whole under a temporary name and then
    /// linked into place (`link(2)` never replaces a file), so two processes starting at once
    /// end up with one key and nobody reads half a key.
    pub fn load_or_create(path: &Path) -> Result<LinkKey, KeyError> {
        loop {
            match LinkKey::load(path) {
                Err(KeyError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                other => return other,
            }
            match LinkKey::create(path) {
                Ok(key) => return Ok(key),
                // Someone else made it between our look and our link: read theirs.
                Err(KeyError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads an existing key file, with the checks of [`LinkKey::load_or_create`].
    pub fn load(path: &Path) -> Result<LinkKey, KeyError> {
        let io_err = |source| KeyError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                // O_NOFOLLOW on a symlink.
                Some(libc::ELOOP) => KeyError::NotAFile {
                    path: path.to_owned(),
                },
                _ => io_err(e),
            })?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            return Err(KeyError::NotAFile {
                path: path.to_owned(),
            });
        }
        let uid = askbus::trust::effective_uid();
        if meta.uid() != uid {
            return Err(KeyError::NotOwned {
                path: path.to_owned(),
                owner: meta.uid(),
                uid,
            });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed {
                path: path.to_owned(),
                mode,
            });
        }
        if meta.len() != KEY_BYTES as u64 {
            return Err(KeyError::WrongSize {
                path: path.to_owned(),
                len: meta.len(),
            });
        }
        let mut key = [0u8; KEY_BYTES];
        file.read_exact(&mut key).map_err(io_err)?;
        Ok(LinkKey(key))
    }

    fn create(path: &Path) -> Result<LinkKey, KeyError> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(KeyError::Random)?;
        let mut tag = [0u8; 8];
        getrandom::fill(&mut tag).map_err(KeyError::Random)?;
        let name = format!(
            ".{}.{}.tmp",
            path.file_name()
                .map_or_else(|| KEY_FILE_NAME.into(), |n| n.to_string_lossy()),
            B64.encode(tag)
        );
        let tmp = path.with_file_name(name);
        let written = (|| -> io::Result<()> {
            let mut f: File = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(&key)?;
            f.sync_all()?;
            std::fs::hard_link(&tmp, path)
        })();
        let _ = std::fs::remove_file(&tmp);
        written.map_err(|source| KeyError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(LinkKey(key))
    }

    /// A key from bytes (tests; a second key to show that links do not cross keys).
    #[cfg(test)]
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> LinkKey {
        LinkKey(bytes)
    }

    /// HMAC-SHA256 of `parts` (each length-prefixed, so no two lists share a MAC input): what
    /// `askbus chat` binds its buttons' callback data with.
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        for p in parts {
            mac.update(&(p.len() as u64).to_be_bytes());
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }

    fn mac(&self, signed: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        mac.update(signed.as_bytes());
        mac
    }

    /// The token for `link` (URL-safe as it is).
    #[cfg_attr(not(test), allow(dead_code))] // signing is askbus notify's
    pub fn sign(&self, link: &Link) -> String {
        let payload = serde_json::to_vec(link).expect("a link serializes");
        let signed = format!("{VERSION}.{}", B64.encode(payload));
        let tag = self.mac(&signed).finalize().into_bytes();
        format!("{signed}.{}", B64.encode(tag))
    }

    /// The link `token` carries, if this key signed it and it has not expired at `now` (Unix
    /// seconds). The signature is compared in constant time and checked before the payload is
    /// parsed, so a forger learns nothing from the answer but "bad signature".
    pub fn verify(&self, token: &str, now: u64) -> Result<Link, LinkError> {
        let mut parts = token.split('.');
        let (Some(version), Some(payload_b64), Some(tag_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(LinkError::Malformed);
        };
        if version != VERSION {
            return Err(LinkError::WrongVersion);
        }
        let tag = B64.decode(tag_b64).map_err(|_| LinkError::Malformed)?;
        self.mac(&format!("{VERSION}.{payload_b64}"))
            .verify_slice(&tag)
            .map_err(|_| LinkError::BadSignature)?;
        let payload = B64.decode(payload_b64).map_err(|_| LinkError::Malformed)?;
        let link: Link = serde_json::from_slice(&payload).map_err(|_| LinkError::Malformed)?;
        let consistent = match link.kind {
            LinkKind::Answer => link.answer.as_ref().is_some_and(|a| a.is_object()),
            LinkKind::Open => link.answer.is_none(),
        };
        let digest = link.shown.len() == 64
            && link
                .shown
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !consistent || link.id.is_empty() || link.nonce.is_empty() || !digest {
            return Err(LinkError::Malformed);
        }
        if now >= link.expires {
            return Err(LinkError::Expired);
        }
        Ok(link)
    }

    /// [`LinkKey::verify`], and the link must be of `kind` (an open link does not answer).
    pub fn verify_kind(&self, token: &str, kind: LinkKind, now: u64) -> Result<Link, LinkError> {
        let link = self.verify(token, now)?;
        if link.kind != kind {
            return Err(LinkError::WrongKind);
        }
        Ok(link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;

    const NOW: u64 = 1_800_000_000;

    fn key() -> LinkKey {
        LinkKey::from_bytes([7; KEY_BYTES])
    }

    const SHOWN: &str = "5e0a9c1f5e0a9c1f5e0a9c1f5e0a9c1f5e0a9c1f5e0a9c1f5e0a9c1f5e0a9c1f";

    fn yes(id: &str) -> Link {
        Link::answer(id, SHOWN, json!({"answers": {"0": "Yes"}}), NOW + 600).unwrap()
    }

    #[test]
    fn a_signed_link_verifies_until_it_expires() {
        let k = key();
        let link = yes("q-1");
        let token = k.sign(&link);
        assert!(token.starts_with("v1."));
        assert!(token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
        assert_eq!(k.verify(&token, NOW).unwrap(), link);
        assert_eq!(k.verify(&token, NOW + 599).unwrap(), link);
        assert_eq!(k.verify(&token, NOW + 600), Err(LinkError::Expired));
        let open = Link::open("q-1", SHOWN, NOW + 60).unwrap();
        assert_eq!(
            k.verify_kind(&k.sign(&open), LinkKind::Open, NOW).unwrap(),
            open
        );
        // Two links for the same answer differ (their nonces), so each is used once.
        assert_ne!(token, k.sign(&yes("q-1")));
    }

    #[test]
    fn the_payload_is_the_agreed_json() {
        let token = key().sign(&yes("q-1"));
        let payload = token.split('.').nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&B64.decode(payload).unwrap()).unwrap();
        assert_eq!(v["k"], "answer");
        assert_eq!(v["id"], "q-1");
        assert_eq!(v["a"], json!({"answers": {"0": "Yes"}}));
        assert_eq!(v["exp"], NOW + 600);
        assert_eq!(B64.decode(v["n"].as_str().unwrap()).unwrap().len(), 16);
        let open = key().sign(&Link::open("q-2", SHOWN, NOW).unwrap());
        let v: serde_json::Value =
            serde_json::from_slice(&B64.decode(open.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(v["k"], "open");
        assert!(v["a"].is_null());
    }

    #[test]
    fn a_forged_signature_is_refused() {
        let k = key();
        let token = k.sign(&yes("q-1"));
        let (signed, _) = token.rsplit_once('.').unwrap();
        // A signature of the right length that the key did not make.
        let forged = format!("{signed}.{}", B64.encode([0u8; 32]));
        assert_eq!(k.verify(&forged, NOW), Err(LinkError::BadSignature));
        // A truncated signature.
        let short = &token[..token.len() - 3];
        assert_eq!(k.verify(short, NOW), Err(LinkError::BadSignature));
        // No signature at all.
        assert_eq!(
            k.verify(&format!("{signed}."), NOW),
            Err(LinkError::BadSignature)
        );
    }

    #[test]
    fn a_tampered_payload_is_refused() {
        let k = key();
        let token = k.sign(&yes("q-1"));
        let parts: Vec<&str> = token.split('.').collect();
        // The same signature over another answer, another question, a later expiry.
        for changed in [
            Link::answer("q-1", SHOWN, json!({"answers": {"0": "No"}}), NOW + 600).unwrap(),
            yes("q-2"),
            Link::answer(
                "q-1",
                SHOWN,
                json!({"answers": {"0": "Yes"}}),
                NOW + 6_000_000,
            )
            .unwrap(),
        ] {
            let payload = B64.encode(serde_json::to_vec(&changed).unwrap());
            let tampered = format!("v1.{payload}.{}", parts[2]);
            assert_eq!(k.verify(&tampered, NOW), Err(LinkError::BadSignature));
        }
    }

    #[test]
    fn another_keys_link_is_refused() {
        let other = LinkKey::from_bytes([8; KEY_BYTES]);
        let token = other.sign(&yes("q-1"));
        assert_eq!(key().verify(&token, NOW), Err(LinkError::BadSignature));
    }

    #[test]
    fn the_wrong_kind_is_refused() {
        let k = key();
        let open = k.sign(&Link::open("q-1", SHOWN, NOW + 60).unwrap());
        assert_eq!(
            k.verify_kind(&open, LinkKind::Answer, NOW),
            Err(LinkError::WrongKind)
        );
        let answer = k.sign(&yes("q-1"));
        assert_eq!(
            k.verify_kind(&answer, LinkKind::Open, NOW),
            Err(LinkError::WrongKind)
        );
        // A signed payload whose kind and answer disagree is malformed.
        let mut odd = Link::open("q-1", SHOWN, NOW + 60).unwrap();
        odd.answer = Some(json!({"answers": {"0": "Yes"}}));
        assert_eq!(k.verify(&k.sign(&odd), NOW), Err(LinkError::Malformed));
    }

    #[test]
    fn malformed_and_other_versions_are_refused() {
        let k = key();
        let token = k.sign(&yes("q-1"));
        assert_eq!(k.verify("", NOW), Err(LinkError::Malformed));
        assert_eq!(k.verify("v1.abc", NOW), Err(LinkError::Malformed));
        assert_eq!(
            k.verify(&format!("{token}.x"), NOW),
            Err(LinkError::Malformed)
        );
        assert_eq!(k.verify("v1.a.!!!", NOW), Err(LinkError::Malformed));
        let v2 = token.replacen("v1.", "v2.", 1);
        assert_eq!(k.verify(&v2, NOW), Err(LinkError::WrongVersion));
        // A correctly signed payload that is not a link.
        let junk = format!("v1.{}", B64.encode(b"{\"k\":\"answer\"}"));
        let tag = B64.encode(k.mac(&junk).finalize().into_bytes());
        assert_eq!(
            k.verify(&format!("{junk}.{tag}"), NOW),
            Err(LinkError::Malformed)
        );
    }

    #[test]
    fn the_key_file_is_made_once_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let a = LinkKey::load_or_create(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), KEY_BYTES as u64);
        let b = LinkKey::load_or_create(&path).unwrap();
        assert_eq!(a.0, b.0);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A link made by one process is good in the other.
        assert!(b.verify(&a.sign(&yes("q")), NOW).is_ok());
    }

    #[test]
    fn an_exposed_short_or_linked_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        LinkKey::load_or_create(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            LinkKey::load_or_create(&path),
            Err(KeyError::Exposed { mode: 0o644, .. })
        ));
        let short = dir.path().join("short.key");
        std::fs::write(&short, b"abc").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            LinkKey::load_or_create(&short),
            Err(KeyError::WrongSize { len: 3, .. })
        ));
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&short, &link).unwrap();
        assert!(matches!(
            LinkKey::load_or_create(&link),
            Err(KeyError::NotAFile { .. })
        ));
        assert!(matches!(
            LinkKey::load_or_create(dir.path()),
            Err(KeyError::NotAFile { .. })
        ));
    }

    #[test]
    fn a_key_file_of_another_user_is_refused() {
        if askbus::trust::effective_uid() != 0 {
            // Only root can give a file away; CI runs as root.
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        LinkKey::load_or_create(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        assert!(matches!(
            LinkKey::load_or_create(&path),
            Err(KeyError::NotOwned { owner: 65534, .. })
        ));
    }

    #[test]
    fn the_default_key_sits_beside_the_socket() {
        assert_eq!(
            default_key_path(Path::new("/run/user/1000/askbus.sock")),
            Path::new("/run/user/1000/web-links.key")
        );
        assert_eq!(
            key_path(Some(Path::new("/k")), Path::new("/s/askbus.sock")),
            Path::new("/k")
        );
    }
}
