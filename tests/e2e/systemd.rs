//! askbusd under systemd's own tools: the unit files pass `systemd-analyze verify` and its
//! offline security review, `systemd-socket-activate` hands askbusd a socket it serves but
//! neither made nor removes, and a NOTIFY_SOCKET the test owns receives the sd_notify
//! protocol (READY, STATUS, RELOADING/READY around SIGHUP, STOPPING, WATCHDOG).

use crate::harness as common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{answer, choice_request, rt, Daemon, RECV_TIMEOUT};
use serde_json::json;

fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd")
}

/// systemd's tool, or a failure that says how to get it.
fn tool(name: &str) -> Command {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(name).is_file());
    assert!(found, "{name} not found: apt-get install -y systemd");
    Command::new(name)
}

/// The units of `kind` (user or system) copied to a temp dir with ExecStart pointing at the
/// binary under test (verify checks that the program exists).
fn staged_units(kind: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for unit in ["askbusd.socket", "askbusd.service"] {
        let text = std::fs::read_to_string(units_dir().join(kind).join(unit)).unwrap();
        assert!(
            unit.ends_with(".socket") || text.contains("ExecStart=/usr/bin/askbusd"),
            "{kind}/{unit}: ExecStart moved; update this test"
        );
        let text = text.replace("/usr/bin/askbusd", common::daemon_bin());
        std::fs::write(dir.path().join(unit), text).unwrap();
    }
    dir
}

fn analyze(kind: &str, args: &[&str], dir: &Path) -> std::process::Output {
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = tool("systemd-analyze");
    if kind == "user" {
        // The user manager's %t; offline analysis needs one to exist.
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        cmd.arg("--user").env("XDG_RUNTIME_DIR", runtime.path());
    }
    cmd.args(args).current_dir(dir).output().unwrap()
}

#[test]
fn every_unit_file_passes_systemd_analyze_verify_without_a_warning() {
    for kind in ["user", "system"] {
        let dir = staged_units(kind);
        let out = analyze(
            kind,
            &["verify", "askbusd.socket", "askbusd.service"],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{kind}: {stderr}");
        // verify exits 0 on unknown keys and bad values too; it only says so.
        assert!(stderr.trim().is_empty(), "{kind} units: {stderr}");
    }
}

#[test]
fn the_services_are_hardened_by_systemds_own_measure() {
    // systemd-analyze security rates exposure from 0 (locked down) to 10; --threshold fails
    // above it. The system unit has no capability, no network, a dynamic user.
    for (kind, threshold) in [("system", "15"), ("user", "40")] {
        let dir = staged_units(kind);
        let out = analyze(
            kind,
            &[
                "security",
                "--offline=yes",
                &format!("--threshold={threshold}"),
                "askbusd.service",
            ],
            dir.path(),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{kind}: {stdout}");
        let level = stdout
            .lines()
            .find(|l| l.contains("Overall exposure level"))
            .unwrap_or_else(|| panic!("{stdout}"));
        eprintln!("{kind}: {level}");
    }
    for kind in ["user", "system"] {
        let text = std::fs::read_to_string(units_dir().join(kind).join("askbusd.service")).unwrap();
        for directive in [
            "Type=notify",
            "ProtectSystem=strict",
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "RestrictAddressFamilies=AF_UNIX\n",
            "SystemCallFilter=@system-service",
            "MemoryDenyWriteExecute=yes",
            "WatchdogSec=",
            "ExecReload=kill -HUP $MAINPID",
        ] {
            assert!(text.contains(directive), "{kind} service lacks {directive}");
        }
        assert!(
            !text.lines().any(|l| l.starts_with("PrivateUsers=")),
            "it would hide the peers' uids"
        );
    }
    let system_socket = std::fs::read_to_string(units_dir().join("system/askbusd.socket")).unwrap();
    for directive in [
        "ListenStream=/run/askbus/askbus.sock",
        "SocketMode=0660",
        "SocketGroup=askbus",
    ] {
        assert!(
            system_socket.contains(directive),
            "system socket lacks {directive}"
        );
    }
    let user_socket = std::fs::read_to_string(units_dir().join("user/askbusd.socket")).unwrap();
    assert!(user_socket.contains("ListenStream=%t/askbus.sock"));
}

#[test]
fn socket_activation_serves_the_inherited_socket_and_leaves_it_in_place() {
    // Like a .socket unit, systemd-socket-activate listens first and starts askbusd on the
    // first connection, handing it the listener as fd 3.
    let mut d = Daemon::builder()
        .wrapper(&["systemd-socket-activate", "-l", "{socket}"])
        .ready_line("Listening on")
        .start();
    let before = std::fs::metadata(&d.socket).expect("the socket systemd-socket-activate made");
    // askbusd makes its own sockets 0600; systemd-socket-activate's has the default umask's.
    assert_ne!(before.mode() & 0o777, 0o600, "askbusd bound its own socket");
    assert!(!d.log_text().contains("askbusd ready"));
    rt().block_on(async {
        let (mut ui, pending) = d.ui().await;
        assert_eq!(pending, 0);
        let mut producer = d.connect().await;
        producer.send(choice_request("sa-1")).await;
        let req = ui.recv_type("ask-user-request").await;
        assert_eq!(req["correlationId"], "sa-1");
        ui.send(answer("sa-1", json!({"0": "SQLite"}))).await;
        ui.recv_type("ask-user-ack").await;
        let resp = producer.recv_type("ask-user-response").await;
        assert_eq!(resp["reason"], "answered");
        assert_eq!(resp["answers"]["0"], "SQLite");
    });
    let log = d.log_text();
    assert!(
        log.contains("askbusd ready on") && log.contains("inherited=true"),
        "{log}"
    );
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let after = std::fs::metadata(&d.socket).expect("askbusd removed a socket it did not create");
    assert_eq!(
        (after.dev(), after.ino()),
        (before.dev(), before.ino()),
        "the socket was replaced"
    );
}

/// A datagram socket standing in for systemd's notify socket.
struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Notify {
    fn new() -> Notify {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        Notify {
            sock,
            path,
            _dir: dir,
        }
    }

    /// The next message (its lines), failing after `RECV_TIMEOUT`.
    fn recv(&self) -> Vec<String> {
        self.recv_within(RECV_TIMEOUT)
            .expect("no sd_notify message in time")
    }

    fn recv_within(&self, wait: Duration) -> Option<Vec<String>> {
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).ok()?;
        Some(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Messages until one has `line`, which is returned; STATUS-only updates may come between.
    fn until(&self, line: &str) -> Vec<String> {
        let deadline = Instant::now() + RECV_TIMEOUT;
        loop {
            let msg = self.recv();
            if msg.iter().any(|l| l == line) {
                return msg;
            }
            assert!(Instant::now() < deadline, "never got {line}");
        }
    }
}

#[test]
fn notify_socket_gets_ready_status_reloading_and_stopping() {
    let notify = Notify::new();
    let mut d = Daemon::builder()
        .env("NOTIFY_SOCKET", &notify.path)
        .config("max_pending = 10\n")
        .start();
    let ready = notify.recv();
    assert_eq!(ready[0], "READY=1", "{ready:?}");
    assert_eq!(ready[1], "STATUS=0 pending, 0 UIs, 0 connections");
    rt().block_on(async {
        let (_ui, _) = d.ui().await;
        let mut producer = d.connect().await;
        producer.send(choice_request("n-1")).await;
        // STATUS follows the live counts (checked once a second, so a check may fall between
        // the subscription and the request).
        let status = notify.until("STATUS=1 pending, 1 UI, 2 connections");
        assert_eq!(status.len(), 1, "{status:?}");
        d.reload();
        let reloading = notify.until("RELOADING=1");
        assert!(
            reloading.iter().any(|l| l.starts_with("MONOTONIC_USEC=")),
            "{reloading:?}"
        );
        let ready = notify.until("READY=1");
        assert!(
            ready.contains(&"STATUS=1 pending, 1 UI, 2 connections".to_owned()),
            "{ready:?}"
        );
    });
    // A config that fails to load still ends the reload with READY=1.
    d.write_config("max_pending = oops\n");
    d.reload();
    notify.until("RELOADING=1");
    notify.until("READY=1");
    assert!(d.log_text().contains("reload failed"));
    d.signal(libc::SIGTERM);
    let stopping = notify.until("STOPPING=1");
    assert!(
        stopping.contains(&"STATUS=stopping".to_owned()),
        "{stopping:?}"
    );
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success());
}

#[test]
fn watchdog_pings_at_half_the_watchdog_interval() {
    let notify = Notify::new();
    let _d = Daemon::builder()
        .env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "400000")
        .start();
    assert_eq!(notify.recv()[0], "READY=1");
    let mut pings = Vec::new();
    let started = Instant::now();
    while pings.len() < 6 {
        let msg = notify.recv_within(Duration::from_secs(2)).expect("a ping");
        if msg == ["WATCHDOG=1"] {
            pings.push(Instant::now());
        }
    }
    // Every 200 ms: six pings take about a second; none comes early, or very late even on a
    // loaded machine.
    let gaps: Vec<Duration> = pings.windows(2).map(|w| w[1] - w[0]).collect();
    for gap in &gaps {
        assert!(
            *gap >= Duration::from_millis(150) && *gap <= Duration::from_millis(700),
            "{gaps:?}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(4), "{gaps:?}");
}

#[test]
fn without_notify_socket_askbusd_runs_as_always() {
    // No NOTIFY_SOCKET, no LISTEN_FDS: it binds its own socket (0600) and removes it at exit.
    let mut d = Daemon::start();
    let meta = std::fs::metadata(&d.socket).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert!(d.log_text().contains("inherited=false"));
    let (status, _) = d.terminate(Duration::from_secs(10));
    assert!(status.success());
    assert!(!d.socket.exists(), "askbusd left the socket it made");
}

#[test]
fn under_the_journal_lines_carry_a_priority_and_no_timestamp() {
    let d = Daemon::builder().journal().start();
    rt().block_on(async {
        let mut c = d.connect().await;
        // A frame that is too large: a warning for a misbehaving peer.
        c.send_raw(&u32::MAX.to_be_bytes()).await;
        c.recv_error("frame-too-large").await;
    });
    let deadline = Instant::now() + RECV_TIMEOUT;
    while !d.log_text().contains("<4>") {
        assert!(Instant::now() < deadline, "{}", d.log_text());
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = d.log_text();
    let ready = log
        .lines()
        .find(|l| l.contains("askbusd ready on"))
        .unwrap();
    assert!(ready.starts_with("<6>askbusd ready on "), "{ready}");
    for line in log.lines() {
        assert!(
            line.starts_with("<3>")
                || line.starts_with("<4>")
                || line.starts_with("<6>")
                || line.starts_with("<7>"),
            "{line}"
        );
        assert!(!line.contains("INFO") && !line.contains(" 20"), "{line}");
    }
}

/// Every syscall in systemd's `@group`s (expanding nested groups), by systemd-analyze.
fn syscall_set(groups: &[&str]) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut todo: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(group) = todo.pop() {
        if !seen.insert(group.clone()) {
            continue;
        }
        let listing = tool("systemd-analyze")
            .args(["syscall-filter", &group])
            .output()
            .unwrap();
        assert!(listing.status.success(), "{group}");
        for line in String::from_utf8_lossy(&listing.stdout).lines().skip(1) {
            let item = line.trim();
            if item.is_empty() || item.starts_with('#') {
                continue;
            }
            if item.starts_with('@') {
                todo.push(item.to_owned());
            } else {
                out.insert(item.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_daemons_syscalls_sockets_and_mappings_fit_the_units_sandbox() {
    // What the units allow: SystemCallFilter=@system-service minus ~@privileged @resources,
    // RestrictAddressFamilies=AF_UNIX, MemoryDenyWriteExecute=yes. A daemon that stepped
    // outside would be killed (or refused) under systemd; strace shows what it really does
    // through a whole life: start, serve, stats, reload, watchdog, shutdown.
    let service = std::fs::read_to_string(units_dir().join("system/askbusd.service")).unwrap();
    assert!(service
        .contains("SystemCallFilter=@system-service\nSystemCallFilter=~@privileged @resources\n"));
    let allowed = syscall_set(&["@system-service"]);
    let denied = syscall_set(&["@privileged", "@resources"]);
    let notify = Notify::new();
    let mut d = Daemon::builder()
        .wrapper(&["strace", "-f", "-qq", "-o", "{socket}.strace"])
        .args(&["--socket", "{socket}"])
        .env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "100000")
        .config("max_pending = 10\n[access]\noperator_users = [0]\n")
        .start();
    let pid = d.child_pid();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    for line in maps.lines() {
        let perms = line.split_whitespace().nth(1).unwrap();
        assert!(
            !(perms.contains('w') && perms.contains('x')),
            "a writable and executable mapping: {line}"
        );
    }
    rt().block_on(async {
        let (mut ui, _) = d.ui().await;
        let mut p = d.connect().await;
        p.send(choice_request("sb-1")).await;
        ui.recv_type("ask-user-request").await;
        ui.send(answer("sb-1", json!({"0": "SQLite"}))).await;
        p.recv_type("ask-user-response").await;
        p.send(json!({"type": "stats"})).await;
        p.recv_type("stats").await;
    });
    d.reload_pid(pid);
    notify.until("WATCHDOG=1");
    // SAFETY: kill with our child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = d.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{status}");
    let trace = std::fs::read_to_string(format!("{}.strace", d.socket.display())).unwrap();
    let mut used = std::collections::BTreeSet::new();
    for line in trace.lines() {
        // "PID name(args…" — resumed calls and signals have no "name(" there.
        let Some(call) = line.split_whitespace().nth(1) else {
            continue;
        };
        let Some((name, _)) = call.split_once('(') else {
            continue;
        };
        if name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            used.insert(name.to_owned());
        }
        if name == "socket" {
            assert!(call.starts_with("socket(AF_UNIX,"), "{line}");
        }
    }
    assert!(used.len() > 20, "strace saw too little: {used:?}");
    let outside: Vec<_> = used
        .iter()
        .filter(|s| !allowed.contains(*s) || denied.contains(*s))
        .collect();
    assert!(
        outside.is_empty(),
        "syscalls the unit's filter denies: {outside:?}"
    );
}

#[test]
fn the_notifier_unit_passes_systemd_analyze_verify_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(units_dir().join("user/askbus-notify.service")).unwrap();
    assert!(
        text.contains("ExecStart=/usr/bin/askbus notify"),
        "askbus-notify.service: ExecStart moved; update this test"
    );
    let text = text.replace("/usr/bin/askbus", common::cli_bin());
    std::fs::write(dir.path().join("askbus-notify.service"), text).unwrap();
    // Its After=/Wants= name the socket unit: stage it beside it.
    let socket = std::fs::read_to_string(units_dir().join("user/askbusd.socket")).unwrap();
    std::fs::write(dir.path().join("askbusd.socket"), socket).unwrap();
    let out = analyze("user", &["verify", "askbus-notify.service"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.trim().is_empty(), "askbus-notify.service: {stderr}");
}
