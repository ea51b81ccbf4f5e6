//! Attacks a local adversary on a shared machine would try, with real uids: the test runs as
//! root and runs the binaries (copied where every uid can execute them: a 0700 checkout is
//! out of other uids' reach) as a victim and an attacker uid. Skipped when not root.
//!
//! - the default socket path taken over (`/tmp/askbus-<uid>` pre-created, or a symlink);

use crate::harness as common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const VICTIM: u32 = 61201;
const ATTACKER: u32 = 61202;
const VICTIM2: u32 = 61203;

fn is_root() -> bool {
    if askbusd::paths::effective_uid() != 0 {
        eprintln!("skipped: needs root to run binaries as other uids");
        return false;
    }
    true
}

/// The binaries (and the Python client) copied into a directory every uid can read and run.
struct Bins {
    dir: tempfile::TempDir,
}

impl Bins {
    fn new() -> Bins {
        let dir = tempfile::Builder::new()
            .prefix("askbus-bins-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for bin in [common::daemon_bin(), common::cli_bin()] {
            let to = dir.path().join(Path::new(bin).file_name().unwrap());
            common::copy_executable(bin, &to);
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/src/askbus");
        let to = dir.path().join("py/askbus");
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(py).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
        for d in [dir.path().join("py"), to] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Bins { dir }
    }

    /// `bin` run as `uid`, with nothing of the test's environment (so the default socket
    /// path is `/tmp/askbus-<uid>/askbus.sock`, as under su, cron or ssh without logind).
    fn cmd(&self, bin: &str, uid: u32) -> Command {
        let mut cmd = Command::new(self.dir.path().join(bin));
        cmd.env_clear()
            .env("HOME", "/nonexistent")
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .uid(uid)
            .gid(uid);
        cmd
    }

    fn python(&self, uid: u32, code: &str) -> Command {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", code])
            .env_clear()
            .env("HOME", "/nonexistent")
            .env("PYTHONPATH", self.dir.path().join("py"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir("/")
            .uid(uid)
            .gid(uid);
        cmd
    }
}

/// `/tmp/askbus-<uid>`, the default socket directory without `XDG_RUNTIME_DIR`, cleared.
fn default_dir(uid: u32) -> PathBuf {
    let dir = PathBuf::from(format!("/tmp/askbus-{uid}"));
    let _ = std::fs::remove_file(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A daemon started as `uid`, once its socket answers.
struct Running(Child);

impl Running {
    fn start(mut cmd: Command, socket: &Path) -> Running {
        let child = cmd
            .args(["--no-telemetry", "--no-store", "--socket"])
            .arg(socket)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "the daemon never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        Running(child)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn exit(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Another user pre-creates the victim's default socket directory. The victim's daemon
/// refuses it (saying how to fix it), and once the attacker serves a daemon there, the
/// victim's clients (the CLI and the Python client) refuse to talk to it, so the attacker
/// neither reads a question nor gets an answer in; naming the uid in ASKBUS_DAEMON_UID is
/// the explicit way to trust a shared bus.
#[test]
fn another_users_socket_directory_is_refused_by_daemon_and_clients() {
    if !is_root() {
        return;
    }
    let bins = Bins::new();
    let dir = default_dir(VICTIM);
    std::fs::create_dir(&dir).unwrap();
    chown(&dir, ATTACKER);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();

    let out = bins.cmd("askbusd", VICTIM).output().unwrap();
    assert_ne!(exit(&out), 0);
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "refusing the socket directory /tmp/askbus-{VICTIM}"
        )) && err.contains(&format!("owned by uid {ATTACKER}"))
            && err.contains("mkdir -m 0700"),
        "{err}"
    );

    // The attacker serves a daemon there, its socket open to everyone.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.join("askbus.sock");
    let _evil = Running::start(bins.cmd("askbusd", ATTACKER), &socket);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();

    let questions = r#"[{"question":"Deploy?","header":"Deploy","type":"yesno"}]"#;
    let mut ask = bins
        .cmd("askbus", VICTIM)
        .arg("ask")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut ask.stdin.take().unwrap(), questions.as_bytes()).unwrap();
    let out = ask.wait_with_output().unwrap();
    assert_eq!(exit(&out), 5, "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("refusing askbusd at {}", socket.display()))
            && err.contains(&format!("runs as uid {ATTACKER}"))
            && err.contains(&format!("ASKBUS_DAEMON_UID={ATTACKER}")),
        "{err}"
    );
    for args in [&["pending"][..], &["stats"], &["answer", "x", "--dismiss"]] {
        let out = bins.cmd("askbus", VICTIM).args(args).output().unwrap();
        assert_eq!(exit(&out), 5, "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("refusing askbusd"), "{args:?}");
    }

    let py = bins
        .python(
            VICTIM,
            "import askbus\n\
             try:\n    askbus.Producer().connect()\n\
             except askbus.UntrustedDaemon as e:\n    print(e.code, e.daemon_uid, e)\n",
        )
        .output()
        .unwrap();
    let said = text(&py.stdout);
    assert!(
        said.starts_with(&format!("untrusted-daemon {ATTACKER} refusing askbusd")),
        "{said}{}",
        text(&py.stderr)
    );

    // Told to trust that uid, the client talks to it (and that daemon's own access rules,
    // which admit only its uid and root, refuse the victim).
    let out = bins
        .cmd("askbus", VICTIM)
        .arg("stats")
        .env("ASKBUS_DAEMON_UID", ATTACKER.to_string())
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("forbidden"),
        "{}",
        text(&out.stderr)
    );
    drop(_evil);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A symlink where the socket directory should be, or a directory of the victim's own that
/// its group or others can write, is refused too; the directory askbusd creates itself
/// (0700) is used, and the victim's own clients talk to it.
#[test]
fn symlinked_or_group_writable_socket_directories_are_refused() {
    if !is_root() {
        return;
    }
    let bins = Bins::new();
    let dir = default_dir(VICTIM2);
    let theirs = tempfile::tempdir().unwrap();
    chown(theirs.path(), ATTACKER);
    symlink(theirs.path(), &dir).unwrap();
    let out = bins.cmd("askbusd", VICTIM2).output().unwrap();
    assert_ne!(exit(&out), 0);
    assert!(
        text(&out.stderr).contains("is a symlink"),
        "{}",
        text(&out.stderr)
    );
    assert!(std::fs::read_dir(theirs.path()).unwrap().next().is_none());

    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    chown(&dir, VICTIM2);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    let out = bins.cmd("askbusd", VICTIM2).output().unwrap();
    assert_ne!(exit(&out), 0);
    assert!(
        text(&out.stderr).contains("is writable by its group (mode 0770)"),
        "{}",
        text(&out.stderr)
    );

    std::fs::remove_dir(&dir).unwrap();
    let socket = dir.join("askbus.sock");
    let _own = Running::start(bins.cmd("askbusd", VICTIM2), &socket);
    let meta = std::fs::metadata(&dir).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    let out = bins.cmd("askbus", VICTIM2).arg("stats").output().unwrap();
    assert_eq!(exit(&out), 0, "{}", text(&out.stderr));
    drop(_own);
    let _ = std::fs::remove_dir_all(&dir);
}

/// askbusd run as root with `args`, expected to refuse to start; its stderr.
fn refused_start(args: &[&str]) -> String {
    let sock = tempfile::tempdir().unwrap();
    let out = Command::new(common::daemon_bin())
        .args(args)
        .arg("--no-store")
        .arg("--socket")
        .arg(sock.path().join("s.sock"))
        .env("HOME", "/nonexistent")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_ne!(exit(&out), 0, "askbusd started with {args:?}");
    text(&out.stderr)
}

/// A root daemon whose telemetry path lies where another user can write: a planted symlink
/// (in the other user's directory, or in a sticky world-writable one like /tmp) is never
/// followed, and a planted file is not written; the target stays untouched. A file askbusd
/// creates is 0600 (0640 with --telemetry-group), and an old world-readable one is tightened.
#[test]
fn telemetry_never_follows_a_planted_symlink_and_is_private() {
    if !is_root() {
        return;
    }
    let target_dir = tempfile::tempdir().unwrap();
    let target = target_dir.path().join("shadow");
    std::fs::write(&target, "root's secret\n").unwrap();

    // The attacker's own directory.
    let theirs = tempfile::tempdir().unwrap();
    std::fs::set_permissions(theirs.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(theirs.path(), ATTACKER);
    let planted = theirs.path().join("telemetry.jsonl");
    symlink(&target, &planted).unwrap();
    chown(&planted, ATTACKER);
    let err = refused_start(&["--telemetry", planted.to_str().unwrap()]);
    assert!(err.contains(&format!("belongs to uid {ATTACKER}")), "{err}");

    // A sticky, world-writable directory (like /tmp): the symlink is not followed.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = shared.path().join("telemetry.jsonl");
    symlink(&target, &planted).unwrap();
    chown(&planted, ATTACKER);
    let err = refused_start(&["--telemetry", planted.to_str().unwrap()]);
    assert!(err.contains("is a symlink"), "{err}");
    // A regular file the attacker planted there (to read what is written) is refused too.
    std::fs::remove_file(&planted).unwrap();
    std::fs::write(&planted, "").unwrap();
    chown(&planted, ATTACKER);
    let err = refused_start(&["--telemetry", planted.to_str().unwrap()]);
    assert!(err.contains(&format!("belongs to uid {ATTACKER}")), "{err}");
    // A non-sticky directory others can write.
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = refused_start(&[
        "--telemetry",
        shared.path().join("t.jsonl").to_str().unwrap(),
    ]);
    assert!(err.contains("writable by other users (mode 0777)"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "root's secret\n");

    // Created private, under the default umask; with a group, 0640 and that group.
    use std::os::unix::fs::MetadataExt;
    let own = tempfile::tempdir().unwrap();
    for (group, mode, gid) in [(None, 0o600, 0), (Some("61205"), 0o640, 61205)] {
        let path = own.path().join(format!("t-{mode:o}.jsonl"));
        let mut args = vec!["--telemetry".to_owned(), path.display().to_string()];
        if let Some(g) = group {
            args.extend(["--telemetry-group".to_owned(), g.to_owned()]);
        }
        let sock = own.path().join(format!("s-{mode:o}.sock"));
        let mut cmd = Command::new(common::daemon_bin());
        cmd.args(&args).arg("--no-store").arg("--socket").arg(&sock);
        let mut child = cmd.stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "the daemon never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, mode, "{path:?}");
        assert_eq!(meta.gid(), gid);
        let _ = child.kill();
        let _ = child.wait();
    }
    let old = own.path().join("t-600.jsonl");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let sock = own.path().join("again.sock");
    let mut child = Command::new(common::daemon_bin())
        .arg("--no-store")
        .arg("--telemetry")
        .arg(&old)
        .arg("--socket")
        .arg(&sock)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(std::fs::metadata(&old).unwrap().mode() & 0o777, 0o600);
    let _ = child.kill();
    let _ = child.wait();
}

/// One user pins memory with large pending questions: past its byte budget the next is
/// refused with `too-many-pending` naming the budget, a withdrawn question frees its bytes,
/// and another uid still asks.
#[test]
fn pending_questions_are_bounded_in_bytes_per_uid() {
    if !is_root() {
        return;
    }
    let bins = Bins::new();
    let d = common::Daemon::builder()
        .args(&["--max-pending-bytes-per-uid", "350000"])
        .config(&format!("[access]\nproducer_users = [{VICTIM}]\n"))
        .start();
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let rt = common::rt();
    let big = |id: &str| {
        let mut req = common::choice_request(id);
        req["questions"][0]["question"] = serde_json::json!("x".repeat(100_000));
        req
    };
    let mut hog = rt.block_on(d.connect());
    for i in 0..3 {
        rt.block_on(hog.send(big(&format!("big-{i}"))));
    }
    rt.block_on(hog.send(big("big-3")));
    let err = rt.block_on(hog.recv_error("too-many-pending"));
    assert_eq!(err["correlationId"], "big-3");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("max_pending_bytes_per_uid") && msg.contains("350000"),
        "{msg}"
    );
    // Withdrawing one frees its bytes.
    rt.block_on(hog.send(serde_json::json!({"type": "ask-user-cancel", "correlationId": "big-0"})));
    let r = rt.block_on(hog.recv_type("ask-user-response"));
    assert_eq!(r["correlationId"], "big-0");
    rt.block_on(hog.send(big("big-3")));
    rt.block_on(hog.send(big("big-4")));
    let err = rt.block_on(hog.recv_error("too-many-pending"));
    assert_eq!(err["correlationId"], "big-4");

    // Another uid's budget is its own: its question is taken (no UI, so answered no-ui).
    let mut ask = bins
        .cmd("askbus", VICTIM)
        .args(["ask", "--no-ui", "reject"])
        .env("ASKBUS_SOCKET", &d.socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let questions = r#"[{"question":"Deploy?","header":"Deploy","type":"yesno"}]"#;
    std::io::Write::write_all(&mut ask.stdin.take().unwrap(), questions.as_bytes()).unwrap();
    let out = ask.wait_with_output().unwrap();
    assert_eq!(exit(&out), 3, "{}", text(&out.stderr));
}

/// Another uid past its connection quota connects in a loop: each refusal costs the daemon
/// one write and one close (no descriptor lingers), the log says so once a second rather than
/// once per refusal, and a legitimate client is served throughout.
#[test]
fn a_connect_flood_over_quota_locks_nobody_out() {
    if !is_root() {
        return;
    }
    let d = common::Daemon::builder()
        .args(&["--max-connections-per-uid", "4"])
        .config(&format!("[access]\nproducer_users = [{ATTACKER}]\n"))
        .start();
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    const FLOOD: usize = 3000;
    let flood = format!(
        "import socket\n\
         held = []\n\
         for _ in range(4):\n    s = socket.socket(socket.AF_UNIX); s.connect({path:?}); held.append(s)\n\
         ok = 0\n\
         for _ in range({FLOOD}):\n\
         \x20   s = socket.socket(socket.AF_UNIX)\n\
         \x20   try:\n        s.connect({path:?}); ok += 1\n\
         \x20   except OSError:\n        pass\n\
         \x20   s.close()\n\
         print(ok)\n",
        path = d.socket.display().to_string()
    );
    let attacker = Command::new("python3")
        .args(["-c", &flood])
        .uid(ATTACKER)
        .gid(ATTACKER)
        .current_dir("/")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Served while the flood runs.
    for _ in 0..5 {
        let out = d.cli().args(["stats", "--json"]).output().unwrap();
        assert_eq!(exit(&out), 0, "{}", text(&out.stderr));
    }
    let out = attacker.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Once the daemon answers this, it has taken (and refused) every connection before it.
    let out = d.cli().args(["stats", "--json"]).output().unwrap();
    assert_eq!(exit(&out), 0, "{}", text(&out.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let refused = stats["connectionsRefused"].as_u64().unwrap();
    assert!(refused >= (FLOOD as u64) / 2, "{stats}");
    let fds = std::fs::read_dir(format!("/proc/{}/fd", d.pid()))
        .unwrap()
        .count();
    assert!(fds < 40, "{fds} descriptors open after the flood");
    let log = d.log_text();
    let lines = log.matches("connection refused").count();
    assert!(lines < 100, "{lines} refusal lines for {refused} refusals");
    assert!(log.contains("suppressed"), "{log}");
}
