//! Attacks a local adversary on a shared machine would try, with real uids: the test runs as
//! root and runs the binaries (copied where every uid can execute them: a 0700 checkout is
//! out of other uids' reach) as a victim and an attacker uid. Skipped when not root.
//!
//! - the default socket path taken over (`/tmp/askbus-<uid>` pre-created, or a symlink);

mod common;

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
            std::fs::copy(bin, &to).unwrap();
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
            .args(["--no-telemetry", "--socket"])
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
