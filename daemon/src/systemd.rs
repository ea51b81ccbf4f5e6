//! systemd integration: the listener inherited by socket activation (LISTEN_FDS), the
//! sd_notify protocol (READY, STATUS, RELOADING, STOPPING, WATCHDOG), and whether stderr is
//! the journal. Every notification is a no-op when NOTIFY_SOCKET is unset, so askbusd runs
//! the same outside systemd.

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::hub::Hub;

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("bad socket activation environment: {0}")]
    Env(std::io::Error),
    #[error("systemd passed {0} sockets; askbusd serves exactly one (check the .socket unit)")]
    Count(usize),
    #[error("the inherited descriptor {fd} is not a listening Unix stream socket")]
    NotAUnixListener { fd: RawFd },
}

/// The listener systemd passed (LISTEN_FDS/LISTEN_PID), if it passed one. The variables are
/// then removed, so nothing askbusd might start inherits them. Call before any thread is
/// started (the environment is not thread-safe to change).
pub fn inherited_listener() -> Result<Option<UnixListener>, SystemdError> {
    let fds: Vec<RawFd> = sd_notify::listen_fds()
        .map_err(SystemdError::Env)?
        .collect();
    for var in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        // SAFETY (of the environment): the caller runs this before starting threads.
        std::env::remove_var(var);
    }
    match fds.as_slice() {
        [] => Ok(None),
        &[fd] => {
            let is = |level, opt, want| sockopt(fd, level, opt) == Some(want);
            if !(is(libc::SOL_SOCKET, libc::SO_DOMAIN, libc::AF_UNIX)
                && is(libc::SOL_SOCKET, libc::SO_TYPE, libc::SOCK_STREAM)
                && is(libc::SOL_SOCKET, libc::SO_ACCEPTCONN, 1))
            {
                return Err(SystemdError::NotAUnixListener { fd });
            }
            // SAFETY: systemd handed us this descriptor to own; nothing else in the process
            // refers to it, and it was checked to be a listening Unix stream socket.
            Ok(Some(unsafe { UnixListener::from_raw_fd(fd) }))
        }
        more => Err(SystemdError::Count(more.len())),
    }
}

fn sockopt(fd: RawFd, level: libc::c_int, opt: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are valid for writing one c_int.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(value)
}

/// Sends one notification. Failing to reach the manager is logged, never fatal: the service
/// manager going away must not take the bus down with it.
fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "sd_notify failed");
    }
}

/// READY=1, with the first STATUS.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// RELOADING=1 (with MONOTONIC_USEC, which Type=notify-reload requires).
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading, NotifyState::Status("reloading")];
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    notify(&states);
}

/// STOPPING=1.
pub fn stopping() {
    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

pub fn status(status: &str) {
    notify(&[NotifyState::Status(status)]);
}

/// The live counts systemctl status shows.
pub fn status_line(hub: &Hub) -> String {
    let snap = hub.snapshot();
    let r = snap.roles;
    let connections = r.producer + r.ui + r.watcher + r.idle;
    let mut line = format!(
        "{} pending, {} UI{}, {} connection{}",
        snap.pending,
        r.ui,
        if r.ui == 1 { "" } else { "s" },
        connections,
        if connections == 1 { "" } else { "s" },
    );
    if let Some(f) = hub.fed_summary() {
        if f.connected {
            line.push_str(&format!(
                "; NATS connected, {} other node{}, {} remote pending, rtt {:.1} ms",
                f.nodes,
                if f.nodes == 1 { "" } else { "s" },
                f.remote_pending,
                f.rtt_us as f64 / 1000.0
            ));
        } else {
            line.push_str("; NATS disconnected (local bus only)");
        }
    }
    line
}

/// Keeps STATUS= current (checked every `every`, sent when it changed) until `stop`.
pub async fn keep_status(hub: Arc<Hub>, every: Duration, stop: CancellationToken) {
    let mut last = String::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let now = status_line(&hub);
        if now != last {
            status(&now);
            last = now;
        }
    }
}

/// How often to ping the watchdog: half of WatchdogSec (WATCHDOG_USEC, for this pid), as
/// sd_watchdog_enabled(3) advises.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
        .filter(|d| !d.is_zero())
        .map(|d| d / 2)
}

/// Sends WATCHDOG=1 every `every` until `stop`, each time after taking the broker's lock:
/// a wedged broker or a starved runtime stops the pings, and systemd restarts the daemon.
pub async fn keep_watchdog(hub: Arc<Hub>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let _ = hub.counts();
        notify(&[NotifyState::Watchdog]);
    }
}

/// Whether stderr is connected to the journal (JOURNAL_STREAM names its device and inode),
/// so log lines should carry no timestamp and a `<N>` priority prefix instead.
pub fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}
