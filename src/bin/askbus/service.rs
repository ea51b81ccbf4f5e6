//! `askbus service install | uninstall | status`: puts askbusd under systemd the way the
//! project ships it. The units written are the ones in `systemd/` (embedded here, so the
//! shipped files stay the one source) with `ExecStart=` pointing at the askbusd actually
//! installed, and a header that marks them as ours: install rewrites and uninstall removes only
//! files carrying it, unless `--force`. Where a systemd manager is running it runs
//! `daemon-reload` and `enable`; elsewhere it prints exactly what to run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

const USER_SOCKET: &str = include_str!("../../../systemd/user/askbusd.socket");
const USER_SERVICE: &str = include_str!("../../../systemd/user/askbusd.service");
const SYSTEM_SOCKET: &str = include_str!("../../../systemd/system/askbusd.socket");
const SYSTEM_SERVICE: &str = include_str!("../../../systemd/system/askbusd.service");
const EXAMPLE_CONFIG: &str = include_str!("../../../systemd/askbusd.toml");
const SYSUSERS: &str = include_str!("../../../systemd/askbus.sysusers.conf");

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

/// What stands at a unit's path today.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    Absent,
    /// Ours, with this text.
    Ours(String),
    /// Written by someone else (a package, an admin, a copy of systemd/).
    Foreign,
}

fn existing(path: &Path) -> Result<Existing> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.starts_with(MARKER) => Ok(Existing::Ours(text)),
        Ok(_) => Ok(Existing::Foreign),
        // Not UTF-8: certainly not ours.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Ok(Existing::Foreign),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Existing::Absent),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The shipped unit `template` with our header and `ExecStart=` running `daemon`.
fn render_unit(template: &str, daemon: &Path, scope_flag: &str) -> Result<String> {
    let mut out = format!(
        "{MARKER} {scope_flag}` (askbus {}).\n\
         # Install rewrites it and `askbus service uninstall {scope_flag}` removes it; put your\n\
         # changes in a drop-in (`systemctl{} edit askbusd`), which survives both.\n",
        env!("CARGO_PKG_VERSION"),
        if scope_flag == "--user" {
            " --user"
        } else {
            ""
        },
    );
    let mut exec_lines = 0;
    for line in template.lines() {
        if line.starts_with("ExecStart=") {
            exec_lines += 1;
            out.push_str("ExecStart=");
            out.push_str(&exec_path(daemon)?);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !template.contains("[Service]") {
        return Ok(out);
    }
    if exec_lines != 1 {
        bail!("the shipped service unit has {exec_lines} ExecStart= lines, expected one");
    }
    Ok(out)
}

/// `path` as the first word of a systemd command line: specifiers (`%`) and variables (`$`)
/// escaped, quoted when it holds spaces or quotes.
fn exec_path(path: &Path) -> Result<String> {
    let s = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8; systemd cannot run it", path.display()))?;
    if !path.is_absolute() {
        bail!("{s}: ExecStart needs an absolute path");
    }
    if s.chars().any(char::is_control) {
        bail!("{s:?}: a path with control characters cannot go in a unit file");
    }
    let escaped = s.replace('%', "%%").replace('$', "$$");
    if escaped
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        Ok(format!(
            "\"{}\"",
            escaped.replace('\\', "\\\\").replace('"', "\\\"")
        ))
    } else {
        Ok(escaped)
    }
}

/// The daemon's real path: `given`, else askbusd beside this executable, else on PATH.
fn find_askbusd(given: Option<&Path>) -> Result<PathBuf> {
    let candidate = match given {
        Some(p) => p.to_path_buf(),
        None => {
            let beside = std::env::current_exe()
                .and_then(|e| e.canonicalize())
                .ok()
                .and_then(|e| e.parent().map(|d| d.join("askbusd")))
                .filter(|p| is_executable(p));
            let on_path = || {
                std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                    .map(|d| d.join("askbusd"))
                    .find(|p| p.is_absolute() && is_executable(p))
            };
            match beside.or_else(on_path) {
                Some(p) => p,
                None => bail!(
                    "cannot find askbusd next to this askbus or on PATH; install it \
                     (cargo install askbusd, or the Debian package) or give --askbusd PATH"
                ),
            }
        }
    };
    let real = candidate
        .canonicalize()
        .with_context(|| format!("askbusd at {}", candidate.display()))?;
    if !is_executable(&real) {
        bail!("{} is not an executable file", real.display());
    }
    Ok(real)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A file install means to write.
struct Planned {
    path: PathBuf,
    text: String,
    /// Units and the sysusers entry are ours to rewrite; a config is the user's once written.
    ours: bool,
}

/// What install would write for `layout` running `daemon`.
fn plan(layout: &Layout, daemon: &Path) -> Result<Vec<Planned>> {
    let flag = layout.scope_flag();
    let mut files = Vec::new();
    for (path, template) in layout.units() {
        files.push(Planned {
            path,
            text: render_unit(template, daemon, flag)?,
            ours: true,
        });
    }
    if let Some(path) = &layout.sysusers {
        files.push(Planned {
            path: path.clone(),
            text: format!("{MARKER} {flag}`.\n{SYSUSERS}"),
            ours: true,
        });
    }
    files.push(Planned {
        path: layout.config.clone(),
        text: EXAMPLE_CONFIG.to_owned(),
        ours: false,
    });
    Ok(files)
}

fn install(args: InstallArgs) -> Result<ExitCode> {
    let scope = Scope::of(&args.scope)?;
    let layout = scope.layout()?;
    let daemon = find_askbusd(args.askbusd.as_deref())?;
    if scope == Scope::System {
        // ProtectHome=yes hides these from the service, and the dynamic user could not
        // traverse them anyway: the unit would verify and then fail at every start.
        for hidden in ["/home", "/root", "/run/user"] {
            if daemon.starts_with(hidden) {
                bail!(
                    "{} is under {hidden}, which the system service cannot see (ProtectHome=yes): \
                     copy it where every user can run it, e.g. \
                     `sudo install -m755 {} /usr/local/bin/askbusd`, then give --askbusd /usr/local/bin/askbusd",
                    daemon.display(),
                    daemon.display()
                );
            }
        }
    }
    let files = plan(&layout, &daemon)?;

    let mut foreign = Vec::new();
    let mut to_write = Vec::new();
    let mut units_changed = false;
    for f in &files {
        match existing(&f.path)? {
            Existing::Absent => to_write.push(f),
            Existing::Ours(text) if text == f.text => {}
            Existing::Ours(_) => to_write.push(f),
            Existing::Foreign if !f.ours => {} // the user's config: kept
            Existing::Foreign if args.force => to_write.push(f),
            Existing::Foreign => foreign.push(f.path.display().to_string()),
        }
    }
    if !foreign.is_empty() {
        bail!(
            "refusing to overwrite {}: askbus service install did not write {} (no `{MARKER}…` \
             header); --force replaces {}",
            foreign.join(", "),
            if foreign.len() == 1 { "it" } else { "them" },
            if foreign.len() == 1 { "it" } else { "them" },
        );
    }
    for f in &to_write {
        units_changed |= f.ours;
    }

    let mut commands = Vec::new();
    if layout.sysusers.is_some() {
        commands.push(vec!["systemd-sysusers".to_owned()]);
    }
    commands.push(layout.systemctl(&["daemon-reload"]));
    if args.now {
        commands.push(layout.systemctl(&["enable", "--now", "askbusd.socket"]));
        if units_changed {
            commands.push(layout.systemctl(&["try-restart", "askbusd.service"]));
        }
    } else {
        commands.push(layout.systemctl(&["enable", "askbusd.socket"]));
    }

    let mut out = std::io::stdout().lock();
    if args.dry_run {
        for f in &to_write {
            writeln!(out, "==> {} <==", f.path.display())?;
            write!(out, "{}", f.text)?;
        }
        for f in &files {
            if !to_write.iter().any(|w| w.path == f.path) {
                writeln!(out, "==> {} <== (unchanged)", f.path.display())?;
            }
        }
        writeln!(out, "==> commands <==")?;
        for c in &commands {
            writeln!(out, "{}", shell_line(c))?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    if scope == Scope::System && askbusd::paths::effective_uid() != 0 {
        bail!("installing system units needs root: sudo askbus service install --system");
    }
    for f in &files {
        let written = to_write.iter().any(|w| w.path == f.path);
        let verb = match (written, f.ours) {
            (true, _) => "wrote",
            (false, true) => "unchanged",
            (false, false) => "kept (it exists)",
        };
        if written {
            write_file(&f.path, &f.text)?;
        }
        writeln!(out, "{verb} {}", f.path.display())?;
    }
    writeln!(out, "ExecStart={}", daemon.display())?;
    run_or_print(&layout, &commands, &mut out)?;
    if layout.manager_running() {
        let socket = match scope {
            Scope::User => "$XDG_RUNTIME_DIR/askbus.sock",
            Scope::System => "/run/askbus/askbus.sock",
        };
        if args.now {
            writeln!(out, "askbusd starts on the first connection to {socket}")?;
        } else {
            writeln!(
                out,
                "enabled for the next {}; start it now with: {}",
                if scope == Scope::User {
                    "login"
                } else {
                    "boot"
                },
                shell_line(&layout.systemctl(&["start", "askbusd.socket"]))
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn uninstall(args: UninstallArgs) -> Result<ExitCode> {
    let scope = Scope::of(&args.scope)?;
    let layout = scope.layout()?;
    let mut targets: Vec<PathBuf> = layout.units().into_iter().map(|(p, _)| p).collect();
    targets.extend(layout.sysusers.clone());
    let mut remove = Vec::new();
    let mut foreign = Vec::new();
    for path in targets {
        match existing(&path)? {
            Existing::Absent => {}
            Existing::Ours(_) => remove.push(path),
            Existing::Foreign if args.force => remove.push(path),
            Existing::Foreign => foreign.push(path.display().to_string()),
        }
    }
    if !foreign.is_empty() {
        bail!(
            "refusing to remove {}: askbus service install did not write it; --force removes it",
            foreign.join(", ")
        );
    }
    let mut out = std::io::stdout().lock();
    if remove.is_empty() {
        writeln!(
            out,
            "nothing to remove: no askbus {} units in {}",
            if scope == Scope::User {
                "user"
            } else {
                "system"
            },
            layout.unit_dir.display()
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let before = vec![layout.systemctl(&["disable", "--now", "askbusd.socket", "askbusd.service"])];
    let after = vec![layout.systemctl(&["daemon-reload"])];
    if args.dry_run {
        writeln!(out, "==> commands <==")?;
        for c in &before {
            writeln!(out, "{}", shell_line(c))?;
        }
        for p in &remove {
            writeln!(out, "rm {}", shell_word(&p.display().to_string()))?;
        }
        for c in &after {
            writeln!(out, "{}", shell_line(c))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if scope == Scope::System && askbusd::paths::effective_uid() != 0 {
        bail!("removing system units needs root: sudo askbus service uninstall --system");
    }
    // Disable while the unit files still exist, so systemctl knows what to stop and unlink.
    let running = layout.manager_running();
    if running {
        run_or_print(&layout, &before, &mut out)?;
    }
    for p in &remove {
        std::fs::remove_file(p).with_context(|| format!("cannot remove {}", p.display()))?;
        writeln!(out, "removed {}", p.display())?;
    }
    if !running {
        // Offline, disable only removes the wants/ symlinks it made; say to run it anyway.
        run_or_print(&layout, &before, &mut out)?;
    }
    run_or_print(&layout, &after, &mut out)?;
    if layout.config.exists() {
        writeln!(
            out,
            "kept {} (your settings; remove it if you no longer want them)",
            layout.config.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn status(scope: Scope) -> Result<ExitCode> {
    let layout = scope.layout()?;
    let mut out = std::io::stdout().lock();
    let mut installed = true;
    let daemon = find_askbusd(None).ok();
    writeln!(
        out,
        "askbus {} service",
        if scope == Scope::User {
            "user"
        } else {
            "system"
        }
    )?;
    for (path, template) in layout.units() {
        let state = existing(&path)?;
        let text = match &state {
            Existing::Absent => {
                // A package's unit (the .deb's, in /usr/lib) applies where none is in /etc or
                // ~/.config.
                let packaged = layout
                    .packaged_dir
                    .join(path.file_name().expect("a unit name"));
                match std::fs::read_to_string(&packaged) {
                    Ok(text) => {
                        writeln!(
                            out,
                            "  {}: not installed; the package's {} applies",
                            path.display(),
                            packaged.display()
                        )?;
                        text
                    }
                    Err(_) => {
                        installed = false;
                        writeln!(out, "  {}: not installed", path.display())?;
                        continue;
                    }
                }
            }
            Existing::Ours(t) => t.clone(),
            Existing::Foreign => std::fs::read_to_string(&path).unwrap_or_default(),
        };
        let origin = if matches!(state, Existing::Ours(_)) {
            "written by askbus service install"
        } else {
            "not written by askbus service install"
        };
        let current = match (&state, &daemon) {
            (Existing::Ours(t), Some(d)) => {
                if render_unit(template, d, layout.scope_flag()).is_ok_and(|r| &r == t) {
                    ", up to date"
                } else {
                    ", differs from what install would write now"
                }
            }
            _ => "",
        };
        writeln!(out, "  {}: {origin}{current}", path.display())?;
        if let Some(exec) = text.lines().find_map(|l| l.strip_prefix("ExecStart=")) {
            let bin = exec.trim_matches('"');
            let ok = is_executable(Path::new(bin));
            installed &= ok;
            writeln!(
                out,
                "    ExecStart={exec} ({})",
                if ok { "exists" } else { "MISSING" }
            )?;
        }
    }
    writeln!(
        out,
        "  {}: {}",
        layout.config.display(),
        if layout.config.exists() {
            "present"
        } else {
            "absent (the defaults apply)"
        }
    )?;
    if layout.manager_running() {
        for unit in ["askbusd.socket", "askbusd.service"] {
            let ask = |verb: &str| {
                let cmd = layout.systemctl(&[verb, unit]);
                Command::new(&cmd[0])
                    .args(&cmd[1..])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_else(|e| format!("unknown ({e})"))
            };
            writeln!(
                out,
                "  systemd: {unit} {}, {}",
                ask("is-enabled"),
                ask("is-active")
            )?;
        }
    } else {
        writeln!(
            out,
            "  systemd: no {} manager is running here",
            if scope == Scope::User {
                "user"
            } else {
                "system"
            }
        )?;
    }
    if !installed {
        writeln!(
            out,
            "install with: askbus service install {}",
            layout.scope_flag()
        )?;
    }
    Ok(if installed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
    fn each_shipped_service_has_one_exec_start_and_it_is_replaced() {
        for template in [USER_SERVICE, SYSTEM_SERVICE] {
            let unit = render_unit(template, Path::new("/opt/a b/askbusd"), "--user").unwrap();
            assert!(unit.starts_with(MARKER));
            let exec: Vec<_> = unit
                .lines()
                .filter(|l| l.starts_with("ExecStart="))
                .collect();
            assert_eq!(exec, ["ExecStart=\"/opt/a b/askbusd\""]);
            // Everything else is the shipped unit, line for line.
            let body: Vec<_> = unit
                .lines()
                .skip(3)
                .filter(|l| !l.starts_with("ExecStart="))
                .collect();
            let shipped: Vec<_> = template
                .lines()
                .filter(|l| !l.starts_with("ExecStart="))
                .collect();
            assert_eq!(body, shipped);
        }
    }

    #[test]
    fn exec_paths_escape_specifiers_variables_and_quotes() {
        assert_eq!(
            exec_path(Path::new("/usr/bin/askbusd")).unwrap(),
            "/usr/bin/askbusd"
        );
        assert_eq!(
            exec_path(Path::new("/x/100%/$HOME/d")).unwrap(),
            "/x/100%%/$$HOME/d"
        );
        assert_eq!(
            exec_path(Path::new("/x/a\"b c")).unwrap(),
            "\"/x/a\\\"b c\""
        );
        assert!(exec_path(Path::new("relative/askbusd")).is_err());
        assert!(exec_path(Path::new("/x/a\nb")).is_err());
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("askbusd.socket"), "askbusd.socket");
        assert_eq!(shell_word("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
