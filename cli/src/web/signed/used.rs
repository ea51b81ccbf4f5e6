//! The signed links' key and their single use: the key is loaded at start (or at the first
//! link after a failed start), and each answer link's nonce is claimed before it acts and kept
//! until the link expires, in memory and in a 0600 file beside the key (`.used`).

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::Refusal;
use crate::links::{now_unix, KeyError, Link, LinkKey, LinkKind};

/// The key and the links already used.
pub struct Links {
    /// Loaded at start, or at the first link after a failed start (the socket's directory may
    /// not exist before askbusd first runs).
    key: Mutex<Option<Arc<LinkKey>>>,
    key_path: PathBuf,
    pub(super) socket: PathBuf,
    /// Nonce → the link's expiry; pruned as links expire. `None` until the used-links file
    /// was read (answer links are refused meanwhile).
    used: Mutex<Option<HashMap<String, u64>>>,
    /// `<key>.used`: one line `EXPIRY NONCE` per answer link used.
    used_path: PathBuf,
    /// Answers given through links since the start.
    pub answered: AtomicU64,
}

impl Links {
    /// Loads the key at `key_path` (or makes it); a failure is said on stderr and retried at
    /// the first link, which is refused meanwhile.
    pub fn new(key_path: PathBuf, socket: PathBuf) -> Links {
        let mut used_path = key_path.clone().into_os_string();
        used_path.push(".used");
        let links = Links {
            key: Mutex::new(None),
            key_path,
            socket,
            used: Mutex::new(None),
            used_path: used_path.into(),
            answered: AtomicU64::new(0),
        };
        if let Err(e) = links.key() {
            eprintln!("askbus web: signed links (askbus notify) will not work until fixed: {e}");
        }
        if let Err(e) = links.used_map() {
            eprintln!("askbus web: answer links will not work until fixed: {e}");
        }
        links
    }

    /// The used links, read from the file (and the file compacted) at the first need.
    fn used_map(&self) -> Result<std::sync::MutexGuard<'_, Option<HashMap<String, u64>>>, String> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.is_none() {
            *used = Some(load_used(&self.used_path, now_unix())?);
        }
        Ok(used)
    }

    fn key(&self) -> Result<Arc<LinkKey>, KeyError> {
        let mut key = self.key.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = &*key {
            return Ok(k.clone());
        }
        let k = Arc::new(LinkKey::load_or_create(&self.key_path)?);
        *key = Some(k.clone());
        Ok(k)
    }

    pub(super) fn verify(&self, token: &str, kind: LinkKind) -> Result<Link, Refusal> {
        let key = self.key().map_err(|e| {
            eprintln!("askbus web: refused a signed link: {e}");
            Refusal::NoKey
        })?;
        key.verify_kind(token, kind, now_unix())
            .map_err(Refusal::Link)
    }

    pub(super) fn is_used(&self, link: &Link) -> Result<bool, Refusal> {
        let used = self.used_map().map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        Ok(used.as_ref().is_some_and(|u| u.contains_key(&link.nonce)))
    }

    /// Claims the link, on disk before anything acts on it: `Err(Used)` if it was used
    /// already.
    pub(super) fn claim(&self, link: &Link) -> Result<(), Refusal> {
        let now = now_unix();
        let mut guard = self.used_map().map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        let used = guard.as_mut().expect("loaded");
        used.retain(|_, exp| *exp > now);
        if used.contains_key(&link.nonce) {
            return Err(Refusal::Used);
        }
        append_used(&self.used_path, &link.nonce, link.expires).map_err(|e| {
            eprintln!("askbus web: refused an answer link: {e}");
            Refusal::NoKey
        })?;
        used.insert(link.nonce.clone(), link.expires);
        Ok(())
    }
}

/// Opens the used-links file as only its owner may have it (this user's, mode 0600, not a
/// link): anyone else who could write it could make a used link usable again.
fn open_used(path: &FsPath, write: bool) -> Result<Option<std::fs::File>, String> {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(libc::O_NOFOLLOW).mode(0o600);
    if write {
        o.append(true).create(true);
    }
    let f = match o.open(path) {
        Ok(f) => f,
        Err(e) if !write && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("used-links file {}: {e}", path.display())),
    };
    let meta = f
        .metadata()
        .map_err(|e| format!("used-links file {}: {e}", path.display()))?;
    let uid = askbus::trust::effective_uid();
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "used-links file {} is not a private file of yours (uid {uid}, mode 0600): remove it",
            path.display()
        ));
    }
    Ok(Some(f))
}

/// Reads the used links still unexpired at `now`, and rewrites the file with only those.
fn load_used(path: &FsPath, now: u64) -> Result<HashMap<String, u64>, String> {
    let mut used = HashMap::new();
    let Some(f) = open_used(path, false)? else {
        return Ok(used);
    };
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| format!("used-links file {}: {e}", path.display()))?;
        if let Some((exp, nonce)) = line.split_once(' ') {
            if let Ok(exp) = exp.parse::<u64>() {
                if exp > now && !nonce.is_empty() {
                    used.insert(nonce.to_owned(), exp);
                }
            }
        }
    }
    // Compacted under a temporary name, then renamed over: a crash leaves one whole file.
    let tmp = path.with_extension("used.tmp");
    let _ = std::fs::remove_file(&tmp);
    let written = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        for (nonce, exp) in &used {
            writeln!(f, "{exp} {nonce}")?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("used-links file {}: {e}", path.display()));
    }
    Ok(used)
}

/// Records a used link durably (written and synced before the answer is sent).
fn append_used(path: &FsPath, nonce: &str, expires: u64) -> Result<(), String> {
    let mut f = open_used(path, true)?.expect("created");
    let io = |e: std::io::Error| format!("used-links file {}: {e}", path.display());
    // A nonce is base64url: no space or newline can break the line format.
    writeln!(f, "{expires} {nonce}").map_err(io)?;
    f.sync_data().map_err(io)
}
