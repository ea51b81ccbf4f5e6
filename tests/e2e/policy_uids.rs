//! Policy tiers between real uids (the test runs as root, the daemon's own uid, and runs a
//! second uid's producer and CLI; skipped when not root): one uid's user-tier rules never
//! decide another uid's requests, the other uid can neither read nor change them through
//! `askbus policy`, a file planted in them by another uid is refused, and admin-tier files
//! not owned by root are refused.

use crate::harness as common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// The second uid: no passwd entry, so it has no policy directory of its own.
const OTHER: u32 = 61211;

fn is_root() -> bool {
    if askbusd::paths::effective_uid() != 0 {
        eprintln!("skipped: needs root to run a second uid");
        return false;
    }
    true
}

/// The CLI and the Python client copied where every uid can run them (the checkout may be
/// out of other uids' reach).
struct Bins(tempfile::TempDir);

impl Bins {
    fn new() -> Bins {
        let dir = tempfile::Builder::new()
            .prefix("askbus-pbins-")
            .tempdir()
            .unwrap();
        let mode =
            |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        mode(dir.path());
        let cli = dir.path().join("askbus");
        common::copy_executable(common::cli_bin(), &cli);
        mode(&cli);
        let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/src/askbus");
        let to = dir.path().join("py/askbus");
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(py).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
        mode(&dir.path().join("py"));
        mode(&to);
        Bins(dir)
    }

    /// The CLI as `uid`, with only the environment given.
    fn cli(&self, uid: u32, env: &[(&str, &Path)]) -> Command {
        let mut cmd = Command::new(self.0.path().join("askbus"));
        cmd.env_clear()
            .env("HOME", "/nonexistent")
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            .uid(uid)
            .gid(uid);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// How a shell approval of `command`, asked as `uid` with noUi reject, ends:
    /// `answered True` (a rule allowed), `answered False` (a rule denied) or `no-ui False`
    /// (put before people, of whom none is there).
    fn approval(&self, uid: u32, socket: &Path, id: &str, tool: &str, args: &str) -> String {
        let code = "import askbus, json, sys\n\
                    with askbus.Producer(sys.argv[1], client='uid-test') as p:\n\
                    \x20   r = p.confirm({'name': sys.argv[3], 'args': json.loads(sys.argv[4])},\n\
                    \x20                 outcomes=['proceed_once', 'cancel'], no_ui='reject',\n\
                    \x20                 correlation_id=sys.argv[2])\n\
                    \x20   print(r.reason, r.confirmed)\n";
        let out = Command::new("python3")
            .args(["-c", code])
            .arg(socket)
            .args([id, tool, args])
            .env_clear()
            .env("HOME", "/nonexistent")
            .env("PYTHONPATH", self.0.path().join("py"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir("/")
            .uid(uid)
            .gid(uid)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_owned()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A daemon (as root) with policies on, the admin tier in `admin`, that `OTHER` may reach and
/// ask through.
fn start(admin: &Path) -> common::Daemon {
    let admin = admin.display().to_string();
    let d = common::Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .args(&["--policy-admin-dir", &admin])
        .config(&format!("[access]\nproducer_users = [{OTHER}]\n"))
        .start();
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    d
}

#[test]
fn one_uids_user_rules_never_decide_or_leak_to_another_uid() {
    if !is_root() {
        return;
    }
    let bins = Bins::new();
    let admin = tempfile::tempdir().unwrap();
    let d = start(admin.path());
    // Root's own rules, written as a person writes them (`askbus policy add`: a 0600 file).
    for args in [
        &[
            "run_shell_command",
            "--decision",
            "allow",
            "--command-prefix",
            "cargo build",
        ][..],
        &[
            "read_file",
            "--decision",
            "deny",
            "--args-pattern",
            r#""file_path":"[^"]*\.env""#,
            "--deny-message",
            "Root's secrets stay unread.",
        ][..],
    ] {
        ok(&d.cli().args(["policy", "add"]).args(args).output().unwrap());
    }
    let mine = d.dir.path().join("askbus/policies");
    let file = std::fs::read_dir(&mine)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "toml"))
        .expect("policy add wrote a file");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("cargo build"), "{written}");

    let cargo = r#"{"command":"cargo build --release"}"#;
    let env_file = r#"{"file_path":"app/.env"}"#;
    let root = |id: &str, tool: &str, args: &str| bins.approval(0, &d.socket, id, tool, args);
    let other = |id: &str, tool: &str, args: &str| bins.approval(OTHER, &d.socket, id, tool, args);
    // Root's rules decide root's requests...
    assert_eq!(root("r1", "run_shell_command", cargo), "answered True");
    assert_eq!(root("r2", "read_file", env_file), "answered False");
    // ...and never the other uid's: its cargo build is asked, its .env read is what the
    // shipped defaults say (read_file allowed), not root's deny.
    assert_eq!(other("o1", "run_shell_command", cargo), "no-ui False");
    assert_eq!(other("o2", "read_file", env_file), "answered True");

    // Through askbus the other uid neither reads nor changes root's rules: its own tier is
    // its own, and pointed at root's directory, the files' modes stop it.
    let listed = ok(&bins
        .cli(OTHER, &[])
        .args(["policy", "list", "--json"])
        .output()
        .unwrap());
    assert!(!listed.contains("cargo build"), "{listed}");
    let pointed = [("XDG_CONFIG_HOME", d.dir.path())];
    let out = bins
        .cli(OTHER, &pointed)
        .args(["policy", "list", "--json"])
        .output()
        .unwrap();
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!shown.contains("cargo build"), "{shown}");
    assert!(!shown.contains("secrets"), "{shown}");
    for args in [
        &[
            "policy",
            "add",
            "*",
            "--decision",
            "allow",
            "--priority",
            "999",
        ][..],
        &["policy", "rm", "1"][..],
    ] {
        let out = bins.cli(OTHER, &pointed).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}: {}", text(&out.stdout));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), written);

    // A file in root's tier that root does not own (planted, or given away) is refused.
    let planted = mine.join("planted.toml");
    std::fs::write(
        &planted,
        "[[rule]]\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 999\n",
    )
    .unwrap();
    std::os::unix::fs::chown(&planted, Some(OTHER), Some(OTHER)).unwrap();
    assert_eq!(
        root("r3", "run_shell_command", r#"{"command":"rm -rf build"}"#),
        "no-ui False"
    );
    // `askbus policy list` says so, as the daemon decides.
    let listed = ok(&d.cli().args(["policy", "list", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert!(
        v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["file"] == "planted.toml"
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("not owned by the tier's owner")),
        "{listed}"
    );
    assert!(!listed.contains("User: planted.toml"), "{listed}");
}

#[test]
fn admin_files_are_taken_only_from_root() {
    if !is_root() {
        return;
    }
    let bins = Bins::new();
    let admin = tempfile::tempdir().unwrap();
    // Root's file (0644) is taken; the same kind of file owned by another uid is not.
    std::fs::write(
        admin.path().join("a-root.toml"),
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"make\"\ndecision = \"deny\"\npriority = 900\ndenyMessage = \"The admin says no.\"\n",
    )
    .unwrap();
    let theirs = admin.path().join("b-theirs.toml");
    std::fs::write(
        &theirs,
        "[[rule]]\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 999\n",
    )
    .unwrap();
    for f in ["a-root.toml", "b-theirs.toml"] {
        std::fs::set_permissions(admin.path().join(f), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }
    std::os::unix::fs::chown(&theirs, Some(OTHER), Some(OTHER)).unwrap();
    let d = start(admin.path());
    let ask = |uid: u32, id: &str, command: &str| {
        let args = serde_json::json!({ "command": command }).to_string();
        bins.approval(uid, &d.socket, id, "run_shell_command", &args)
    };
    // The other uid's allow-everything file decides nothing, for anyone.
    for (uid, id) in [(0, "r"), (OTHER, "o")] {
        assert_eq!(ask(uid, &format!("{id}1"), "rm -rf build"), "no-ui False");
        // Root's admin file decides for every uid.
        assert_eq!(
            ask(uid, &format!("{id}2"), "make install"),
            "answered False"
        );
    }
    let log = d.log_text();
    assert!(
        log.contains("b-theirs.toml") && log.contains("Policy file ignored"),
        "{log}"
    );
    assert!(!log.contains("a-root.toml (admin tier"), "{log}");
}
