//! `askbus service install | uninstall | status` as a user runs them: the units it prints with
//! `--dry-run` pass `systemd-analyze verify` (user and system) and rate no worse under
//! `systemd-analyze security` than the shipped ones; a real install into a temp
//! `$XDG_CONFIG_HOME` points ExecStart at the real askbusd, is idempotent, keeps the user's
//! config, refuses files it did not write unless --force, and uninstalls what it wrote. And
//! `askbus man --dir` writes every page askbus.1 refers to.

use crate::harness as common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{cli_bin, daemon_bin};

/// askbus with a private config home and runtime dir (so no user manager is "running").
fn askbus(home: &Path, args: &[&str]) -> Output {
    let runtime = home.join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    Command::new(cli_bin())
        .args(args)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("HOME", home)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `--dry-run` output split into its files (`==> PATH <==` headers) and the commands.
fn parse_dry_run(out: &str) -> (BTreeMap<PathBuf, String>, Vec<String>) {
    let mut files = BTreeMap::new();
    let mut commands = Vec::new();
    let mut current: Option<PathBuf> = None;
    let mut in_commands = false;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("==> ") {
            in_commands = rest == "commands <==";
            current = rest
                .strip_suffix(" <==")
                .filter(|_| !in_commands)
                .map(PathBuf::from);
            if let Some(p) = &current {
                files.insert(p.clone(), String::new());
            }
            continue;
        }
        if in_commands {
            commands.push(line.to_owned());
        } else if let Some(p) = &current {
            let body = files.get_mut(p).unwrap();
            body.push_str(line);
            body.push('\n');
        }
    }
    (files, commands)
}

fn systemd_analyze(user: bool, args: &[&str], dir: &Path) -> Output {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("systemd-analyze").is_file());
    assert!(
        found,
        "systemd-analyze not found: apt-get install -y systemd"
    );
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("systemd-analyze");
    if user {
        std::fs::set_permissions(runtime.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        cmd.arg("--user").env("XDG_RUNTIME_DIR", runtime.path());
    }
    cmd.args(args).current_dir(dir).output().unwrap()
}

/// "Overall exposure level for askbusd.service: 1.0 OK" → 1.0
fn exposure(out: &Output) -> f64 {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("{stdout}"));
    line.split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn dry_run_units_verify_and_are_as_hardened_as_the_shipped_ones() {
    for (scope, user) in [("--user", true), ("--system", false)] {
        let home = tempfile::tempdir().unwrap();
        let out = askbus(home.path(), &["service", "install", scope, "--dry-run"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let (files, commands) = parse_dry_run(&text(&out.stdout));
        let unit = |name: &str| {
            files
                .iter()
                .find(|(p, _)| p.file_name().unwrap() == name)
                .unwrap_or_else(|| panic!("{scope}: no {name} in {files:?}"))
        };
        let (socket_path, socket) = unit("askbusd.socket");
        let (service_path, service) = unit("askbusd.service");
        let unit_dir = if user {
            home.path().join("config/systemd/user")
        } else {
            PathBuf::from("/etc/systemd/system")
        };
        assert_eq!(socket_path.parent().unwrap(), unit_dir);
        assert_eq!(service_path.parent().unwrap(), unit_dir);
        // ExecStart is the real askbusd beside the askbus under test.
        let real = Path::new(daemon_bin()).canonicalize().unwrap();
        assert!(
            service.contains(&format!("\nExecStart={}\n", real.display())),
            "{service}"
        );
        let config = if user {
            home.path().join("config/askbus/askbusd.toml")
        } else {
            PathBuf::from("/etc/askbus/askbusd.toml")
        };
        assert!(
            files.contains_key(&config) || !user,
            "{scope}: no config in {files:?}"
        );
        let ctl = if user {
            "systemctl --user"
        } else {
            "systemctl"
        };
        assert!(
            commands.contains(&format!("{ctl} daemon-reload")),
            "{commands:?}"
        );
        assert!(
            commands.contains(&format!("{ctl} enable askbusd.socket")),
            "{commands:?}"
        );
        // Nothing was written.
        assert!(!home.path().join("config").exists());

        let staged = tempfile::tempdir().unwrap();
        std::fs::write(staged.path().join("askbusd.socket"), socket).unwrap();
        std::fs::write(staged.path().join("askbusd.service"), service).unwrap();
        let out = systemd_analyze(
            user,
            &["verify", "askbusd.socket", "askbusd.service"],
            staged.path(),
        );
        assert!(out.status.success(), "{scope}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).trim().is_empty(),
            "{scope}: {}",
            text(&out.stderr)
        );

        // The shipped service, ExecStart aside, rates the same: the hardening came along.
        let kind = if user { "user" } else { "system" };
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("systemd/{kind}/askbusd.service")),
        )
        .unwrap()
        .replace("/usr/bin/askbusd", daemon_bin());
        let shipped_dir = tempfile::tempdir().unwrap();
        std::fs::write(shipped_dir.path().join("askbusd.service"), shipped).unwrap();
        let args = ["security", "--offline=yes", "askbusd.service"];
        let ours = exposure(&systemd_analyze(user, &args, staged.path()));
        let theirs = exposure(&systemd_analyze(user, &args, shipped_dir.path()));
        assert!(ours <= theirs, "{scope}: {ours} > shipped {theirs}");
    }
}

#[test]
fn install_is_idempotent_keeps_the_config_and_uninstall_removes_what_it_wrote() {
    let home = tempfile::tempdir().unwrap();
    let units = home.path().join("config/systemd/user");
    let config = home.path().join("config/askbus/askbusd.toml");

    let status = askbus(home.path(), &["service", "status"]);
    assert!(text(&status.stdout).contains("not installed"));
    // Unless the .deb's user units are on this machine, nothing applies.
    if !Path::new("/usr/lib/systemd/user/askbusd.service").exists() {
        assert_eq!(status.status.code(), Some(1), "{}", text(&status.stdout));
    }

    let out = askbus(home.path(), &["service", "install"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!(
        "wrote {}",
        units.join("askbusd.service").display()
    )));
    // No manager here: it says what to run instead.
    assert!(
        stdout.contains("systemctl --user enable askbusd.socket"),
        "{stdout}"
    );
    let service = std::fs::read_to_string(units.join("askbusd.service")).unwrap();
    let real = Path::new(daemon_bin()).canonicalize().unwrap();
    assert!(service.contains(&format!("\nExecStart={}\n", real.display())));
    assert!(service.starts_with("# Written by `askbus service install --user`"));
    assert!(std::fs::read_to_string(&config)
        .unwrap()
        .contains("[access]"));

    // Again: nothing changes; the user's edited config survives.
    std::fs::write(&config, "log_level = \"debug\"\n").unwrap();
    let out = askbus(home.path(), &["service", "install"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains(&format!(
        "unchanged {}",
        units.join("askbusd.socket").display()
    )));
    assert!(stdout.contains("kept (it exists)"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "log_level = \"debug\"\n"
    );

    let status = askbus(home.path(), &["service", "status"]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stdout));
    assert!(text(&status.stdout).contains("up to date"));

    let out = askbus(home.path(), &["service", "uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!units.join("askbusd.socket").exists());
    assert!(!units.join("askbusd.service").exists());
    assert!(config.exists(), "uninstall keeps the config");
    assert!(text(&out.stdout).contains("systemctl --user disable --now askbusd.socket"));
    let out = askbus(home.path(), &["service", "uninstall"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("nothing to remove"));
}

#[test]
fn notify_installs_the_notifier_unit_running_this_askbus_and_uninstall_removes_it() {
    let home = tempfile::tempdir().unwrap();
    let units = home.path().join("config/systemd/user");
    let real = Path::new(cli_bin()).canonicalize().unwrap();

    // The notifier is per user: a system install of it is refused, nothing written.
    let out = askbus(home.path(), &["service", "install", "--system", "--notify"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("askbus service install --user --notify"),
        "{}",
        text(&out.stderr)
    );

    // Dry run: the unit runs this askbus's `notify` and verifies beside the daemon's units.
    let out = askbus(
        home.path(),
        &["service", "install", "--notify", "--dry-run"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (files, commands) = parse_dry_run(&text(&out.stdout));
    let notifier = &files[&units.join("askbus-notify.service")];
    assert!(
        notifier.contains(&format!("\nExecStart={} notify\n", real.display())),
        "{notifier}"
    );
    assert!(notifier.starts_with("# Written by `askbus service install --user`"));
    assert!(notifier.contains("systemctl --user edit askbus-notify"));
    assert!(
        commands.contains(&"systemctl --user enable askbus-notify.service".to_owned()),
        "{commands:?}"
    );
    assert!(!home.path().join("config").exists());
    let staged = tempfile::tempdir().unwrap();
    for name in ["askbusd.socket", "askbusd.service", "askbus-notify.service"] {
        std::fs::write(staged.path().join(name), &files[&units.join(name)]).unwrap();
    }
    let out = systemd_analyze(
        true,
        &[
            "verify",
            "askbusd.socket",
            "askbusd.service",
            "askbus-notify.service",
        ],
        staged.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).trim().is_empty(), "{}", text(&out.stderr));

    // For real, then again (unchanged), then uninstall takes it with the daemon's units.
    let out = askbus(home.path(), &["service", "install", "--notify"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("systemctl --user enable askbus-notify.service"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        &std::fs::read_to_string(units.join("askbus-notify.service")).unwrap(),
        notifier
    );
    let out = askbus(home.path(), &["service", "install", "--notify"]);
    assert!(text(&out.stdout).contains(&format!(
        "unchanged {}",
        units.join("askbus-notify.service").display()
    )));
    let out = askbus(home.path(), &["service", "uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!units.join("askbus-notify.service").exists());
    assert!(
        text(&out.stdout).contains(
            "systemctl --user disable --now askbusd.socket askbusd.service askbus-notify.service"
        ),
        "{}",
        text(&out.stdout)
    );

    // A notifier unit the user wrote is theirs: uninstall keeps it and does not refuse.
    let out = askbus(home.path(), &["service", "install"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::write(
        units.join("askbus-notify.service"),
        "[Service]\nExecStart=/bin/true\n",
    )
    .unwrap();
    let out = askbus(home.path(), &["service", "uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(units.join("askbus-notify.service").exists());
    assert!(!units.join("askbusd.service").exists());
}

#[test]
fn units_it_did_not_write_are_refused_unless_forced() {
    let home = tempfile::tempdir().unwrap();
    let units = home.path().join("config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    let mine = "[Service]\nExecStart=/opt/mine/askbusd\n";
    std::fs::write(units.join("askbusd.service"), mine).unwrap();

    for args in [
        &["service", "install"][..],
        &["service", "install", "--dry-run"],
        &["service", "uninstall"],
    ] {
        let out = askbus(home.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("askbus service install did not write"),
            "{err}"
        );
        assert!(err.contains("--force"), "{err}");
        assert_eq!(
            std::fs::read_to_string(units.join("askbusd.service")).unwrap(),
            mine
        );
    }
    // Nothing half-done: the socket unit was not written either.
    assert!(!units.join("askbusd.socket").exists());

    let out = askbus(home.path(), &["service", "install", "--force"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(units.join("askbusd.service"))
        .unwrap()
        .starts_with("# Written by"));
}

#[test]
fn status_notices_a_daemon_that_is_gone_and_install_takes_the_one_given() {
    let home = tempfile::tempdir().unwrap();
    let bin_dir = home.path().join("opt dir");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let copy = bin_dir.join("askbusd");
    common::copy_executable(daemon_bin(), &copy);
    let out = askbus(
        home.path(),
        &["service", "install", "--askbusd", copy.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let service =
        std::fs::read_to_string(home.path().join("config/systemd/user/askbusd.service")).unwrap();
    // Quoted: the path has a space.
    assert!(
        service.contains(&format!("\nExecStart=\"{}\"\n", copy.display())),
        "{service}"
    );
    let status = askbus(home.path(), &["service", "status"]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stdout));

    std::fs::remove_file(&copy).unwrap();
    let status = askbus(home.path(), &["service", "status"]);
    assert_eq!(status.status.code(), Some(1));
    assert!(
        text(&status.stdout).contains("MISSING"),
        "{}",
        text(&status.stdout)
    );

    let out = askbus(
        home.path(),
        &["service", "install", "--askbusd", copy.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(copy.to_str().unwrap()));
}

#[test]
fn without_an_askbusd_to_run_install_says_how_to_get_one() {
    // A lone askbus, nothing on PATH.
    let home = tempfile::tempdir().unwrap();
    let lone = home.path().join("bin/askbus");
    std::fs::create_dir_all(lone.parent().unwrap()).unwrap();
    common::copy_executable(cli_bin(), &lone);
    let out = Command::new(&lone)
        .args(["service", "install", "--dry-run"])
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("PATH", home.path().join("empty"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot find askbusd") && err.contains("--askbusd"),
        "{err}"
    );
}

#[test]
fn man_dir_writes_every_page_the_main_page_refers_to() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cli_bin())
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let main = std::fs::read_to_string(dir.path().join("askbus.1")).unwrap();
    let mut referred = Vec::new();
    for page in [
        &main,
        &std::fs::read_to_string(dir.path().join("askbus-service.1")).unwrap(),
    ] {
        // clap_mangen writes references as `askbus\-ask(1)`.
        let unescaped = page.replace("\\-", "-");
        for word in unescaped.split(|c: char| c.is_whitespace() || c == '\\' || c == '"') {
            if let Some(name) = word.strip_suffix("(1)") {
                if name.starts_with("askbus-") {
                    referred.push(name.to_owned());
                }
            }
        }
    }
    for name in [
        "askbus-ask",
        "askbus-service",
        "askbus-service-install",
        "askbus-ui",
    ] {
        assert!(
            referred.iter().any(|r| r == name),
            "{name} not referred to: {referred:?}"
        );
    }
    for name in &referred {
        assert!(
            dir.path().join(format!("{name}.1")).is_file(),
            "{name}.1 missing"
        );
    }
    assert!(!referred.iter().any(|r| r == "askbus-help"));
    // The daemon's page, for packages.
    let out = Command::new(daemon_bin()).arg("--man").output().unwrap();
    assert!(out.status.success());
    let page = text(&out.stdout);
    assert!(
        page.contains(".TH askbusd 1") && page.contains("max\\-pending"),
        "{page}"
    );
}

/// `--now` where no systemd manager runs (a container, SSH without lingering) enabled and
/// started nothing: it says so and fails instead of exiting 0 (issue 31 item 11).
#[test]
fn install_now_without_a_manager_fails_and_says_what_to_do() {
    if Path::new("/run/systemd/system").is_dir() {
        return; // a real manager could be running here; the case needs its absence
    }
    let home = tempfile::tempdir().unwrap();
    let out = askbus(home.path(), &["service", "install", "--now"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(
        err.contains("nothing was started") && err.contains("askbusd"),
        "{err}"
    );
    // The units are written all the same, and the commands to enable them printed.
    assert!(text(&out.stdout).contains("systemctl --user enable --now askbusd.socket"));
}

/// `systemd-analyze security --offline` on `askbusd.service` in `dir`: the line of `check`.
fn security_line(user: bool, dir: &Path, check: &str) -> String {
    let out = systemd_analyze(user, &["security", "--offline=yes", "askbusd.service"], dir);
    text(&out.stdout)
        .lines()
        .find(|l| l.contains(check))
        .unwrap_or_else(|| panic!("no {check} in {}", text(&out.stdout)))
        .to_owned()
}

/// Federation as a service (issue 31): the shipped units allow Unix sockets only, so
/// `--nats` adds a drop-in that lets askbusd open Internet sockets, and for the system unit
/// (which denies every IP address) allows the servers' addresses. The units with it verify,
/// and systemd itself reads the drop-in: Internet sockets allowed, the address allow list set.
#[test]
fn nats_adds_a_drop_in_that_lets_the_service_reach_the_servers() {
    for (scope, user) in [("--user", true), ("--system", false)] {
        let home = tempfile::tempdir().unwrap();
        let out = askbus(
            home.path(),
            &[
                "service",
                "install",
                scope,
                "--dry-run",
                "--nats",
                "nats://127.0.0.1:4222,tls://[::1]:4443",
            ],
        );
        assert!(out.status.success(), "{scope}: {}", text(&out.stderr));
        let (files, _) = parse_dry_run(&text(&out.stdout));
        let unit_dir = if user {
            home.path().join("config/systemd/user")
        } else {
            PathBuf::from("/etc/systemd/system")
        };
        let drop_in = files
            .get(&unit_dir.join("askbusd.service.d/askbus-federation.conf"))
            .unwrap_or_else(|| panic!("{scope}: no drop-in in {files:?}"));
        assert!(drop_in.starts_with(&format!("# Written by `askbus service install {scope}`")));
        assert!(
            drop_in.contains("\n[Service]\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"),
            "{drop_in}"
        );
        if user {
            assert!(!drop_in.contains("IPAddress"), "{drop_in}");
            // The config install writes federates, and askbusd takes it.
            let config = &files[&home.path().join("config/askbus/askbusd.toml")];
            let table: toml::Table = config.parse().unwrap();
            assert_eq!(
                table["nats"],
                toml::Value::Array(vec![
                    "nats://127.0.0.1:4222".into(),
                    "tls://[::1]:4443".into()
                ]),
                "{config}"
            );
            let path = home.path().join("askbusd.toml");
            std::fs::write(&path, config).unwrap();
            let check = Command::new(daemon_bin())
                .args(["--check-config", "--config"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(check.status.success(), "{}", text(&check.stderr));
        } else {
            assert!(
                drop_in.ends_with("\nIPAddressAllow=127.0.0.1 ::1\n"),
                "{drop_in}"
            );
        }

        let staged = tempfile::tempdir().unwrap();
        for name in ["askbusd.socket", "askbusd.service"] {
            std::fs::write(staged.path().join(name), &files[&unit_dir.join(name)]).unwrap();
        }
        let before = security_line(user, staged.path(), "RestrictAddressFamilies=~AF_(INET");
        assert!(before.starts_with('✓'), "{scope}: {before}");
        std::fs::create_dir(staged.path().join("askbusd.service.d")).unwrap();
        std::fs::write(
            staged
                .path()
                .join("askbusd.service.d/askbus-federation.conf"),
            drop_in,
        )
        .unwrap();
        let out = systemd_analyze(
            user,
            &["verify", "askbusd.socket", "askbusd.service"],
            staged.path(),
        );
        assert!(out.status.success(), "{scope}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).trim().is_empty(),
            "{scope}: {}",
            text(&out.stderr)
        );
        let after = security_line(user, staged.path(), "RestrictAddressFamilies=~AF_(INET");
        assert!(after.starts_with('✗'), "{scope}: {after}");
        if !user {
            let ip = security_line(user, staged.path(), "IPAddressDeny=");
            assert!(ip.contains("allow list"), "{ip}");
        }
    }
}

/// The config's own `nats` is enough: install writes the drop-in from it, status shows it,
/// uninstall removes it. `--nats` beside a config of the user's that says otherwise keeps the
/// config and says what to put in it.
#[test]
fn a_config_that_federates_gets_the_drop_in_and_uninstall_removes_it() {
    let home = tempfile::tempdir().unwrap();
    let units = home.path().join("config/systemd/user");
    let drop_in = units.join("askbusd.service.d/askbus-federation.conf");
    let config = home.path().join("config/askbus/askbusd.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "log_level = \"debug\"\n").unwrap();

    // No nats anywhere: no drop-in.
    let out = askbus(home.path(), &["service", "install"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!drop_in.exists());

    // --nats with the user's config kept: the drop-in, and what to add to the config.
    let out = askbus(
        home.path(),
        &["service", "install", "--nats", "nats://127.0.0.1:4222"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("wrote {}", drop_in.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("set `nats = [\"nats://127.0.0.1:4222\"]` there"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "log_level = \"debug\"\n"
    );
    std::fs::remove_file(&drop_in).unwrap();

    // The config federates: a plain install writes the drop-in, then leaves it unchanged.
    std::fs::write(&config, "nats = \"nats://127.0.0.1:4222\"\n").unwrap();
    let status = askbus(home.path(), &["service", "status"]);
    assert!(
        text(&status.stdout).contains("the config sets `nats`: the service cannot reach NATS"),
        "{}",
        text(&status.stdout)
    );
    let out = askbus(home.path(), &["service", "install"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&drop_in).unwrap();
    assert!(written.contains("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"));
    assert!(written.contains("(127.0.0.1:4222)"), "{written}");
    let out = askbus(home.path(), &["service", "install"]);
    assert!(
        text(&out.stdout).contains(&format!("unchanged {}", drop_in.display())),
        "{}",
        text(&out.stdout)
    );
    let status = askbus(home.path(), &["service", "status"]);
    assert!(
        text(&status.stdout).contains("network sockets for federation"),
        "{}",
        text(&status.stdout)
    );

    let out = askbus(home.path(), &["service", "uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!drop_in.exists());
    assert!(!units.join("askbusd.service.d").exists());
    assert!(config.exists());
}

/// The drop-in is enough for what a federating askbusd really does: under strace, a daemon
/// that reaches a real nats-server by host name (`localhost`, so name resolution runs too)
/// opens only the address families the drop-in allows, and connects only to addresses the
/// system drop-in's `IPAddressAllow=` lets through.
#[test]
fn a_federating_daemon_stays_inside_what_the_drop_in_allows() {
    let nats = common::nats::Nats::start();
    let url = format!("nats://localhost:{}", nats.port);
    let home = tempfile::tempdir().unwrap();
    let out = askbus(
        home.path(),
        &[
            "service",
            "install",
            "--system",
            "--dry-run",
            "--nats",
            &url,
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (files, _) = parse_dry_run(&text(&out.stdout));
    let drop_in = &files[Path::new("/etc/systemd/system/askbusd.service.d/askbus-federation.conf")];
    let families: Vec<&str> = drop_in
        .lines()
        .find_map(|l| l.strip_prefix("RestrictAddressFamilies="))
        .unwrap()
        .split(' ')
        .collect();
    let allow: Vec<&str> = drop_in
        .lines()
        .find_map(|l| l.strip_prefix("IPAddressAllow="))
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(allow, ["localhost"], "{drop_in}");
    // systemd's "localhost": 127.0.0.0/8 and ::1.
    let allowed = |ip: &str| ip.starts_with("127.") || ip == "::1" || allow.contains(&ip);

    let mut d = common::Daemon::builder()
        .wrapper(&["strace", "-f", "-qq", "-o", "{socket}.strace"])
        .args(&["--socket", "{socket}", "--nats", &url, "--node", "traced"])
        .start();
    let pid = d.child_pid();
    common::rt().block_on(common::nats::wait_sees(&d, &[]));
    // SAFETY: kill with our child's pid and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = d.wait_exit(std::time::Duration::from_secs(10));
    assert!(status.success(), "{status}");

    let trace = std::fs::read_to_string(format!("{}.strace", d.socket.display())).unwrap();
    let mut connects = 0;
    for line in trace.lines() {
        let Some(call) = line.split_whitespace().nth(1) else {
            continue;
        };
        if let Some(args) = call.strip_prefix("socket(") {
            let family = args.split(',').next().unwrap();
            assert!(families.contains(&family), "outside the drop-in: {line}");
        }
        if line.contains(" connect(") && !line.contains("sa_family=AF_UNIX") {
            // {sa_family=AF_INET, sin_port=htons(4222), sin_addr=inet_addr("127.0.0.1")}
            // {sa_family=AF_INET6, …, inet_pton(AF_INET6, "::1", &sin6_addr), …}
            let ip = line
                .split('"')
                .nth(1)
                .unwrap_or_else(|| panic!("a connect with no address: {line}"));
            assert!(allowed(ip), "a connect IPAddressAllow= would drop: {line}");
            connects += 1;
        }
    }
    assert!(connects > 0, "it never connected to NATS: {trace}");
}
