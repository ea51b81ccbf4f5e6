//! Which daemon a client agrees to talk to. Without `XDG_RUNTIME_DIR` the default socket is
//! `/tmp/askbus-<uid>/askbus.sock`, a path another local user can create first; whoever
//! listens there would read the questions and answer them. So every connect checks the
//! listener's uid (`SO_PEERCRED`, which a peer cannot forge) before a byte is sent.
//!
//! A daemon is trusted when it runs as this process's uid or as root (a system bus whose
//! socket systemd created and passed on is listened on by root). A shared bus run by another
//! account is named explicitly in `ASKBUS_DAEMON_UID` (a uid, or several separated by commas).

use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

/// The environment variable naming other uids whose daemon this client may talk to.
pub const DAEMON_UID_ENV: &str = "ASKBUS_DAEMON_UID";

/// The daemon at the socket runs as a uid this client does not trust.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing askbusd at {path}: it runs as uid {uid}, not as you (uid {own}) or root, so \
     another user may have taken the socket path; if this is a shared bus you trust, set \
     {DAEMON_UID_ENV}={uid}"
)]
pub struct UntrustedDaemon {
    pub path: PathBuf,
    pub uid: u32,
    pub own: u32,
}

/// Checks who listens on `stream` (connected to `path`): see the module docs.
pub fn check_daemon(stream: &UnixStream, path: &Path) -> Result<(), UntrustedDaemon> {
    // A socket whose peer cannot be asked (not on Linux) is taken as it is.
    let Ok(cred) = stream.peer_cred() else {
        return Ok(());
    };
    check_uid(
        cred.uid(),
        path,
        std::env::var(DAEMON_UID_ENV).ok().as_deref(),
    )
}

/// This process's effective uid: whose bus, socket directory and files these are. The one
/// `geteuid` of every askbus crate that does not link `nix` (the client crate stays small for
/// the agents that link it); the others call this or `nix::unistd::geteuid`.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a socket directory could let another user swap the socket (or plant one first), as
/// tmux and ssh-agent refuse: a symlink (`/tmp/askbus-1000` pointing at someone's directory),
/// a directory owned by anyone but `uid` or root, or one writable by group or others (the
/// sticky bit does not help: another user can still plant a socket first). `Ok(None)` when it
/// is safe; the error when it cannot be read.
pub fn unsafe_socket_dir(dir: &Path, uid: u32) -> std::io::Result<Option<String>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Ok(Some("is a symlink".into()));
    }
    if !meta.is_dir() {
        return Ok(Some("is not a directory".into()));
    }
    if meta.uid() != uid && meta.uid() != 0 {
        return Ok(Some(format!(
            "is owned by uid {}, not by askbusd's uid {uid}",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        let who = if mode & 0o002 != 0 {
            "others"
        } else {
            "its group"
        };
        return Ok(Some(format!("is writable by {who} (mode {mode:04o})")));
    }
    Ok(None)
}

fn check_uid(uid: u32, path: &Path, allowed: Option<&str>) -> Result<(), UntrustedDaemon> {
    let own = effective_uid();
    let named = allowed
        .unwrap_or("")
        .split(',')
        .any(|u| u.trim().parse::<u32>() == Ok(uid));
    if uid == own || uid == 0 || named {
        return Ok(());
    }
    Err(UntrustedDaemon {
        path: path.to_owned(),
        uid,
        own,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_uid_and_root_are_trusted_others_only_when_named() {
        let own = effective_uid();
        let p = Path::new("/tmp/x.sock");
        assert!(check_uid(own, p, None).is_ok());
        assert!(check_uid(0, p, None).is_ok());
        let other = own.wrapping_add(4242);
        let e = check_uid(other, p, None).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("ASKBUS_DAEMON_UID={other}")),
            "{e}"
        );
        assert!(check_uid(other, p, Some("1,2")).is_err());
        assert!(check_uid(other, p, Some(&format!("1, {other}"))).is_ok());
        assert!(check_uid(other, p, Some("")).is_err());
    }
}
