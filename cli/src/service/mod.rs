//! `askbus service install | uninstall | status`: puts askbusd under systemd the way the
//! project ships it. The units written are the ones in `systemd/` (embedded here, so the
//! shipped files stay the one source) with `ExecStart=` pointing at the askbusd actually
//! installed, and a header that marks them as ours: install rewrites and uninstall removes only
//! files carrying it, unless `--force`. Where a systemd manager is running it runs
//! `daemon-reload` and `enable`; elsewhere it prints exactly what to run. A daemon that
//! federates through NATS also gets a drop-in that lets it reach the servers (`federation`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

mod federation;
mod install;
mod status;
mod unit;
pub(crate) use unit::find_askbusd;

use install::{install, uninstall};
use status::status;

const USER_SOCKET: &str = include_str!("../../../systemd/user/askbusd.socket");
const USER_SERVICE: &str = include_str!("../../../systemd/user/askbusd.service");
const SYSTEM_SOCKET: &str = include_str!("../../../systemd/system/askbusd.socket");
const SYSTEM_SERVICE: &str = include_str!("../../../systemd/system/askbusd.service");
const USER_NOTIFY: &str = include_str!("../../../systemd/user/askbus-notify.service");
const EXAMPLE_CONFIG: &str = include_str!("../../../systemd/askbusd.toml");
const SYSUSERS: &str = include_str!("../../../systemd/askbus.sysusers.conf");

/// The notifier's unit name, as `systemctl --user` knows it.
const NOTIFIER_UNIT: &str = "askbus-notify.service";

/// The first line of every file install writes; only such files are rewritten or removed.
const MARKER: &str = "# Written by `askbus service install";

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Write the socket and service units (and the example config if there is none), then
    /// enable the socket.
    ///
    /// ExecStart is the askbusd next to this askbus, else the one on PATH (its real path).
    /// Where a systemd manager runs, this also runs daemon-reload and enable; elsewhere it
    /// prints the commands. Running it again rewrites only what changed.
    Install(InstallArgs),
    /// Disable the socket and service and remove the units install wrote (the config stays).
    Uninstall(UninstallArgs),
    /// Say what is installed, where ExecStart points, and what systemd thinks of it.
    ///
    /// Exit status 0 when both units are installed and their askbusd exists, 1 otherwise.
    Status {
        #[command(flatten)]
        scope: ScopeArgs,
    },
}

#[derive(Debug, clap::Args)]
struct ScopeArgs {
    /// Your own bus: units in ~/.config/systemd/user, socket $XDG_RUNTIME_DIR/askbus.sock
    /// (the default)
    #[arg(long, conflicts_with = "system")]
    user: bool,
    /// One bus for the machine: units in /etc/systemd/system, socket /run/askbus/askbus.sock,
    /// group askbus (needs root)
    #[arg(long)]
    system: bool,
}

#[derive(Debug, clap::Args)]
struct InstallArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// Also start the socket now (enable --now), and restart a running askbusd whose units
    /// changed
    #[arg(long)]
    now: bool,
    /// Print the files and the commands; write and run nothing
    #[arg(long)]
    dry_run: bool,
    /// Replace unit files that askbus service install did not write
    #[arg(long)]
    force: bool,
    /// The daemon ExecStart runs [default: askbusd next to this askbus, else on PATH]
    #[arg(long, value_name = "PATH")]
    askbusd: Option<PathBuf>,
    /// Also install and enable the notifier (`askbus notify`, this askbus) as a user service
    #[arg(long)]
    notify: bool,
    /// Federate through the NATS server at URL (repeat, or comma-separated): the config
    /// install writes gets `nats = [URL]`, and the service a drop-in that lets askbusd reach
    /// it (network sockets; for --system, the servers' addresses only). Without it, the
    /// config's own `nats` decides whether the drop-in is written
    #[arg(long, value_name = "URL")]
    nats: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct UninstallArgs {
    #[command(flatten)]
    scope: ScopeArgs,
    /// Print what would be removed and run; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Remove the unit files even if askbus service install did not write them
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.action {
        Action::Install(a) => install(a),
        Action::Uninstall(a) => uninstall(a),
        Action::Status { scope } => status(Scope::of(&scope)?),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    User,
    System,
}

/// Where one scope's files go, and the commands that manage it.
struct Layout {
    scope: Scope,
    unit_dir: PathBuf,
    /// Where a distribution package puts the same units (lower precedence than `unit_dir`).
    packaged_dir: PathBuf,
    config: PathBuf,
    sysusers: Option<PathBuf>,
}

impl Scope {
    fn of(args: &ScopeArgs) -> Result<Self> {
        Ok(if args.system {
            Scope::System
        } else {
            Scope::User
        })
    }

    fn layout(self) -> Result<Layout> {
        Ok(match self {
            Scope::User => {
                let config_home =
                    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
                        Some(dir) => PathBuf::from(dir),
                        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                            Some(home) => Path::new(&home).join(".config"),
                            None => bail!(
                                "neither XDG_CONFIG_HOME nor HOME is set: where do your units go?"
                            ),
                        },
                    };
                Layout {
                    scope: self,
                    unit_dir: config_home.join("systemd/user"),
                    packaged_dir: PathBuf::from("/usr/lib/systemd/user"),
                    config: config_home.join("askbus/askbusd.toml"),
                    sysusers: None,
                }
            }
            Scope::System => Layout {
                scope: self,
                unit_dir: PathBuf::from("/etc/systemd/system"),
                packaged_dir: PathBuf::from("/usr/lib/systemd/system"),
                config: PathBuf::from("/etc/askbus/askbusd.toml"),
                sysusers: Some(PathBuf::from("/etc/sysusers.d/askbus.conf")),
            },
        })
    }
}

impl Layout {
    /// Where the notifier's unit goes (user scope: `askbus notify` needs the session bus).
    fn notifier_unit(&self) -> PathBuf {
        self.unit_dir.join(NOTIFIER_UNIT)
    }

    /// Where the drop-in that opens the network to federation goes.
    fn federation_drop_in(&self) -> PathBuf {
        self.unit_dir
            .join("askbusd.service.d")
            .join(federation::DROP_IN)
    }

    fn units(&self) -> [(PathBuf, &'static str); 2] {
        let (socket, service) = match self.scope {
            Scope::User => (USER_SOCKET, USER_SERVICE),
            Scope::System => (SYSTEM_SOCKET, SYSTEM_SERVICE),
        };
        [
            (self.unit_dir.join("askbusd.socket"), socket),
            (self.unit_dir.join("askbusd.service"), service),
        ]
    }

    /// `systemctl` or `systemctl --user`, followed by `args`.
    fn systemctl(&self, args: &[&str]) -> Vec<String> {
        let mut cmd = vec!["systemctl".to_owned()];
        if self.scope == Scope::User {
            cmd.push("--user".to_owned());
        }
        cmd.extend(args.iter().map(|a| (*a).to_owned()));
        cmd
    }

    /// Whether a manager of this scope runs here, so systemctl can reach it.
    fn manager_running(&self) -> bool {
        // sd_booted(): the system manager is PID 1.
        if !Path::new("/run/systemd/system").is_dir() {
            return false;
        }
        match self.scope {
            Scope::System => true,
            Scope::User => std::env::var_os("XDG_RUNTIME_DIR")
                .filter(|v| !v.is_empty())
                .is_some_and(|d| Path::new(&d).join("systemd/private").exists()),
        }
    }

    fn scope_flag(&self) -> &'static str {
        match self.scope {
            Scope::User => "--user",
            Scope::System => "--system",
        }
    }
}

/// Writes `text` to `path` whole or not at all (a temp file beside it, renamed), mode 0644.
fn write_file(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().context("a file has a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.askbus-tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("unit")
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `commands` where the manager runs; elsewhere prints them for the user to run later.
fn run_or_print(layout: &Layout, commands: &[Vec<String>], out: &mut impl Write) -> Result<()> {
    if !layout.manager_running() {
        writeln!(
            out,
            "no systemd {} manager is running here; when there is one, run:",
            if layout.scope == Scope::User {
                "user"
            } else {
                "system"
            }
        )?;
        for c in commands {
            writeln!(out, "  {}", shell_line(c))?;
        }
        return Ok(());
    }
    for c in commands {
        writeln!(out, "$ {}", shell_line(c))?;
        out.flush()?;
        let status = Command::new(&c[0])
            .args(&c[1..])
            .status()
            .with_context(|| format!("cannot run {}", c[0]))?;
        if !status.success() {
            bail!("`{}` failed ({status})", shell_line(c));
        }
    }
    Ok(())
}

fn shell_line(cmd: &[String]) -> String {
    cmd.iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `w` quoted for a POSIX shell when it needs to be.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=@%+:,".contains(c))
    {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("askbusd.socket"), "askbusd.socket");
        assert_eq!(shell_word("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
