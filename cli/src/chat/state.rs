//! What `askbus chat` keeps across its restarts, in a file only this user can read (0600,
//! written whole under a temporary name, then renamed into place): the message that shows each
//! pending request (so a restart edits it instead of posting again), the digest message, and
//! the platform's cursor (Telegram's last handled `update_id`, so nothing is missed or applied
//! twice). askbusd's own store does not hold chat message ids (it has no notion of them), so
//! this file does.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Saved {
    /// The platform's cursor: the last update handled (Telegram's `update_id`).
    #[serde(default)]
    pub cursor: Option<u64>,
    /// Pending request id → its message.
    #[serde(default)]
    pub messages: BTreeMap<String, SavedMessage>,
    /// The digest message, while there is one.
    #[serde(default)]
    pub digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedMessage {
    /// The request's digest: a reused correlationId showing something else is another request.
    pub digest: String,
    /// The platform's message reference.
    pub msg: String,
    /// The card's version when last drawn (0: as first posted).
    pub version: u16,
}

pub struct StateFile {
    path: PathBuf,
    pub saved: Saved,
    dirty: bool,
}

/// `$XDG_STATE_HOME/askbus` (else `~/.local/state/askbus`).
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(base.join("askbus"))
}

impl StateFile {
    /// Reads `path` (a missing file is an empty state). A file another user owns, or others
    /// can read, is refused: it names the chat's messages and could be swapped.
    pub fn load(path: &Path) -> Result<StateFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let saved = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Saved::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
            Ok(meta) => {
                if !meta.is_file() {
                    bail!("{} is not a regular file", path.display());
                }
                if meta.uid() != askbus::trust::effective_uid() {
                    bail!("{} is not yours (uid {})", path.display(), meta.uid());
                }
                if meta.mode() & 0o077 != 0 {
                    bail!(
                        "{} is readable by others (mode {:o}): `chmod 600 {}` first",
                        path.display(),
                        meta.mode() & 0o777,
                        path.display()
                    );
                }
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a state file", path.display()))?
            }
        };
        Ok(StateFile {
            path: path.to_owned(),
            saved,
            dirty: false,
        })
    }

    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// Writes the state if it changed since the last write.
    pub fn save(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let tmp = self.path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let body = serde_json::to_vec(&self.saved).expect("state serializes");
        (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(&body)?;
            std::fs::rename(&tmp, &self.path)
        })()
        .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.dirty = false;
        Ok(())
    }
}
