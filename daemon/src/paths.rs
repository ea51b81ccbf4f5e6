//! Where things live by default (socket, telemetry), shared by the daemon and every client so
//! they agree without configuration, the daemon's config file, and the safe creation of the
//! daemon's socket.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The socket path when none is given (the client crate's, so the daemon and every client
/// agree).
pub use askbus::client::default_socket_path;

/// The telemetry file when none is given: `$STATE_DIRECTORY/telemetry.jsonl` (systemd's
/// StateDirectory=), else `$XDG_STATE_HOME/askbus/telemetry.jsonl`, else
/// `~/.local/state/askbus/telemetry.jsonl`, else `/var/lib/askbus/telemetry.jsonl`.
pub fn default_telemetry_path() -> PathBuf {
    if let Some(dir) = systemd_directory("STATE_DIRECTORY") {
        return dir.join("telemetry.jsonl");
    }
    if let Some(dir) = non_empty_env("XDG_STATE_HOME") {
        return Path::new(&dir).join("askbus/telemetry.jsonl");
    }
    if let Some(home) = non_empty_env("HOME") {
        return Path::new(&home).join(".local/state/askbus/telemetry.jsonl");
    }
    PathBuf::from("/var/lib/askbus/telemetry.jsonl")
}

/// The config file when none is given: `$CONFIGURATION_DIRECTORY/askbusd.toml` (systemd's
/// ConfigurationDirectory=), else `$XDG_CONFIG_HOME/askbus/askbusd.toml`, else
/// `/etc/askbus/askbusd.toml` for root (the system bus), else `~/.config/askbus/askbusd.toml`.
/// A missing default file is no error: the defaults apply.
pub fn default_config_path() -> PathBuf {
    if let Some(dir) = systemd_directory("CONFIGURATION_DIRECTORY") {
        return dir.join("askbusd.toml");
    }
    if let Some(dir) = non_empty_env("XDG_CONFIG_HOME") {
        return Path::new(&dir).join("askbus/askbusd.toml");
    }
    match non_empty_env("HOME") {
        Some(home) if effective_uid() != 0 => Path::new(&home).join(".config/askbus/askbusd.toml"),
        _ => PathBuf::from("/etc/askbus/askbusd.toml"),
    }
}

/// The first directory systemd lists in `name` (several are separated by colons).
fn systemd_directory(name: &str) -> Option<PathBuf> {
    let v = non_empty_env(name)?;
    v.split(':').find(|d| !d.is_empty()).map(PathBuf::from)
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// This process's effective uid (the client crate's).
pub use askbus::trust::effective_uid;

/// Refuses a socket directory another user could use to swap the socket: see
/// [`askbus::trust::unsafe_socket_dir`], which clients and `askbus doctor` share.
pub fn check_socket_dir(dir: &Path, uid: u32) -> Result<(), SocketPathError> {
    match askbus::trust::unsafe_socket_dir(dir, uid) {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(SocketPathError::UnsafeDir {
            dir: dir.to_owned(),
            why,
        }),
        Err(source) => Err(SocketPathError::Io {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Why the daemon cannot take a socket path.
#[derive(Debug, thiserror::Error)]
pub enum SocketPathError {
    #[error("{0} is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("{0} is a symlink; refusing to follow or replace it")]
    Symlink(PathBuf),
    #[error("another askbusd is already serving {0}")]
    InUse(PathBuf),
    /// The socket's directory could let another user swap the socket (or plant one first).
    #[error(
        "refusing the socket directory {dir}: it {why}, so another user could replace the \
         socket; use a directory only you own and can write (mkdir -m 0700 DIR), or remove \
         it and let askbusd create it"
    )]
    UnsafeDir { dir: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Makes `path` ready to bind: creates its directory (0700) when missing, refuses a
/// directory another user could write in (see [`check_socket_dir`]), removes a stale socket
/// left by a dead daemon, and refuses anything else that stands there.
pub fn prepare_socket_path(path: &Path) -> Result<(), SocketPathError> {
    let io_err = |source| SocketPathError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err)?;
    }
    check_socket_dir(dir, effective_uid())?;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(e)),
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(SocketPathError::Symlink(path.to_owned()));
    }
    if !ft.is_socket() {
        return Err(SocketPathError::NotASocket(path.to_owned()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(SocketPathError::InUse(path.to_owned())),
        Err(_) => {
            // Only a socket nobody answers on, and only one we could have made: remove_file
            // does not follow symlinks, and the checks above rule one out.
            if meta.uid() != effective_uid() && effective_uid() != 0 {
                return Err(SocketPathError::NotASocket(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(io_err)
        }
    }
}
