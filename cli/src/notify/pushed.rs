//! The requests this notifier pushed to a phone, kept on disk beside the socket
//! (`askbus-notify.pushed`, 0600, one correlationId a line) so that a notifier restarted with
//! askbusd (an upgrade restarts both) does not push the restored requests again. Within one
//! process the notifier's own table already remembers them across reconnects; this is what
//! outlives the process. Only pending requests are kept: ids of ended ones are dropped, and
//! the file is pruned to what the first replay brings back.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

const FILE_NAME: &str = "askbus-notify.pushed";

pub struct Pushed {
    path: PathBuf,
    ids: HashSet<String>,
    /// Changed since the file was last written.
    dirty: bool,
    /// A write failed once already (said once, not at every push).
    warned: bool,
}

impl Pushed {
    /// What an earlier notifier of this bus (this `socket`) recorded; empty when nothing was.
    pub fn load(socket: &Path) -> Pushed {
        let path = match socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => dir.join(FILE_NAME),
            None => PathBuf::from(FILE_NAME),
        };
        let ids = std::fs::read_to_string(&path)
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default();
        Pushed {
            path,
            ids,
            dirty: false,
            warned: false,
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    pub fn insert(&mut self, id: &str) {
        self.dirty |= self.ids.insert(id.to_owned());
    }

    /// The request ended: not written at once (the next save drops it, and a restart prunes
    /// what no replay brings back).
    pub fn remove(&mut self, id: &str) {
        self.dirty |= self.ids.remove(id);
    }

    /// Keeps only the ids `pending` says are still waiting (after a replay).
    pub fn retain(&mut self, pending: impl Fn(&str) -> bool) {
        let before = self.ids.len();
        self.ids.retain(|id| pending(id));
        self.dirty |= self.ids.len() != before;
    }

    /// Writes the file if it changed (a temporary file renamed over it, so a crash leaves the
    /// old one or the new one). A failure is said once; pushing goes on without the record.
    pub fn save(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let tmp = self.path.with_file_name(format!("{FILE_NAME}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            let text: String = self.ids.iter().map(|id| format!("{id}\n")).collect();
            f.write_all(text.as_bytes())?;
            std::fs::rename(&tmp, &self.path)
        };
        if let Err(e) = write() {
            if !std::mem::replace(&mut self.warned, true) {
                eprintln!(
                    "askbus notify: cannot record what was pushed in {}: {e} (a restart may push pending requests again)",
                    self.path.display()
                );
            }
        }
    }
}
