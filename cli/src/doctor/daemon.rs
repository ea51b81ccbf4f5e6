//! `askbus doctor`'s checks of the daemon itself: reaching it over its socket (its version,
//! node, and whether systemd runs it, from its cgroup) and the socket's owner and mode.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use askbus::client::Connection;
use serde_json::{Map, Value};

use super::{Report, Status};

/// Reaches askbusd: its version and node, whether systemd runs it; the stats frame for the
/// checks that follow.
pub(super) async fn daemon(r: &mut Report, socket: &Path) -> Option<Map<String, Value>> {
    let reached = tokio::time::timeout(Duration::from_secs(5), async {
        let mut conn = Connection::connect(socket).await?;
        let stats = conn.stats().await?;
        Ok::<_, askbus::client::ClientError>(stats)
    })
    .await;
    let stats = match reached {
        Ok(Ok(stats)) => stats,
        Ok(Err(e)) => {
            let (text, hint, _) = crate::fail::describe(&e.into());
            let fix = match hint {
                Some(h) => h.to_owned(),
                None => "start it: `askbusd` in a terminal, or `askbus service install --now` \
                         to run it whenever you log in"
                    .to_owned(),
            };
            r.add("daemon", Status::Fail, text, Some(fix));
            return None;
        }
        Err(_) => {
            r.add(
                "daemon",
                Status::Fail,
                format!("askbusd at {} did not answer in 5 s", socket.display()),
                Some(
                    "restart it: `systemctl --user restart askbusd`, or stop and start `askbusd`"
                        .into(),
                ),
            );
            return None;
        }
    };
    let server = stats
        .get("server")
        .and_then(Value::as_str)
        .unwrap_or("askbusd");
    let node = stats.get("node").and_then(Value::as_str).unwrap_or("?");
    let how = match service_unit(socket) {
        Some(unit) => format!("run by systemd ({unit})"),
        None => "started by hand, not as a service".to_owned(),
    };
    let detail = format!("{server} on {} (node {node}), {how}", socket.display());
    if how.starts_with("run by") {
        r.ok("daemon", detail);
    } else {
        r.add(
            "daemon",
            Status::Ok,
            detail,
            Some("to have it whenever you log in: `askbus service install --now`".into()),
        );
    }
    if stats.get("scope").and_then(Value::as_str) == Some("own") {
        r.add(
            "daemon",
            Status::Warn,
            "askbusd runs as another user and shows you only your own counters".into(),
            None,
        );
    }
    Some(stats)
}

/// The systemd unit the daemon serving `socket` runs in, from its cgroup (none for one started
/// by hand in a terminal).
fn service_unit(socket: &Path) -> Option<String> {
    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    let pid = peer_pid(&stream)?;
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroup
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|unit| unit.ends_with(".service") && unit.starts_with("askbus"))
        .map(str::to_owned)
}

fn peer_pid(stream: &std::os::unix::net::UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and a buffer of the size given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// The socket's owner and mode, and its directory (another user must not be able to replace
/// it).
pub(super) fn socket_mode(r: &mut Report, socket: &Path) {
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) => {
            r.add(
                "socket",
                Status::Skip,
                format!("{}: {e}", socket.display()),
                None,
            );
            return;
        }
    };
    let mode = meta.permissions().mode() & 0o777;
    let own = askbus::trust::effective_uid();
    let detail = format!(
        "{} (mode {mode:04o}, owner uid {})",
        socket.display(),
        meta.uid()
    );
    if mode & 0o007 != 0 {
        r.add(
            "socket",
            Status::Fail,
            format!("{detail}: other users may connect"),
            Some(format!(
                "`chmod o-rwx {}`, and let askbusd create its socket (it makes it 0600)",
                socket.display()
            )),
        );
        return;
    }
    if let Some(dir) = socket.parent() {
        let problem = askbus::trust::unsafe_socket_dir(dir, meta.uid())
            .unwrap_or_else(|e| Some(format!("cannot be read ({e})")));
        if let Some(why) = problem {
            r.add(
                "socket",
                Status::Fail,
                format!("{detail}: its directory {} {why}", dir.display()),
                Some(format!(
                    "`chmod 700 {}`, or point ASKBUS_SOCKET at a directory only you can write",
                    dir.display()
                )),
            );
            return;
        }
    }
    if meta.uid() != own && meta.uid() != 0 {
        r.add(
            "socket",
            Status::Warn,
            format!("{detail}: not yours; askbus talks to it only with ASKBUS_DAEMON_UID set"),
            None,
        );
        return;
    }
    r.ok("socket", detail);
}
