//! `askbus hook AGENT --install | --uninstall | --print-config`: the hook in the agent's own
//! settings file, so nobody copies JSON out of a README. The entry carries the right event,
//! matcher and timeouts, and the line the agent shows while the hook waits ("waiting in
//! askbus: …": Claude Code's and Codex's `statusMessage`, Gemini CLI's hook `name`, which it
//! shows as "Executing Hook: …"). Installing merges into what is there (other hooks and
//! settings are kept, an older askbus entry is replaced), shows the diff and keeps a backup;
//! uninstalling removes askbus's entries only.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Map, Value};

use super::Agent;

/// What an agent shows while askbus waits for a person.
pub const WAITING: &str = "waiting in askbus: open `askbus ui` or your phone";

pub const AFTER_HELP: &str = "Setup:\n  askbus hook claude --install      \
    # add the hook to ~/.claude/settings.json (shows the diff, keeps a backup)\n  \
    askbus hook gemini --print-config # the settings entry, to merge by hand\n  \
    askbus hook codex --uninstall     # remove askbus's hook again";

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Add this hook to the agent's settings file (merged with what is there; shows the diff
    /// and keeps a backup) and exit
    #[arg(long, conflicts_with_all = ["uninstall", "print_config"])]
    install: bool,
    /// Remove askbus's hook from the agent's settings file (shows the diff, keeps a backup)
    /// and exit
    #[arg(long, conflicts_with = "print_config")]
    uninstall: bool,
    /// Print the settings entry that --install would merge, and exit
    #[arg(long)]
    print_config: bool,
    /// The settings file [default: ~/.gemini/settings.json, ~/.claude/settings.json,
    /// ~/.codex/hooks.json]
    #[arg(long, value_name = "PATH")]
    settings: Option<PathBuf>,
    /// With --install or --uninstall: show the diff, change nothing
    #[arg(long)]
    dry_run: bool,
}

impl SetupArgs {
    pub fn any(&self) -> bool {
        self.install || self.uninstall || self.print_config
    }
}

/// Why the settings file cannot be changed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not JSON ({source}); fix it or name another file with --settings", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{} holds {what} where an object or array was expected; fix it by hand", path.display())]
    Shape { path: PathBuf, what: String },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no home directory ($HOME is unset): name the file with --settings")]
    NoHome,
}

/// The agent's user settings file, where --install writes by default.
pub fn default_settings(agent: Agent) -> Result<PathBuf, SetupError> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or(SetupError::NoHome)?;
    Ok(home.join(agent.hook().settings_file()))
}

/// The hook event askbus's entry goes under.
pub fn event_key(agent: Agent) -> &'static str {
    agent.hook().install_event()
}

/// The command line an agent's settings run: `askbus` when that is this program on PATH, else
/// this program's absolute path; `--socket` when this one was not the default; then `hook
/// AGENT` and `flags`, the hook's own options as --install was given them (`--fallback ask`,
/// say), each word quoted for the shell.
pub fn command_line(agent: Agent, socket: &Path, flags: &[String]) -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let on_path = which("askbus").and_then(|p| p.canonicalize().ok());
    let program = match (&exe, &on_path) {
        (Some(exe), Some(found)) if exe == found => "askbus".to_owned(),
        (Some(exe), _) => shell_quote(&exe.to_string_lossy()),
        (None, _) => "askbus".to_owned(),
    };
    let mut cmd = program;
    if socket != askbus::client::default_socket_path() {
        cmd.push_str(" --socket ");
        cmd.push_str(&shell_quote(&socket.to_string_lossy()));
    }
    cmd.push_str(" hook ");
    cmd.push_str(agent.name());
    for flag in flags {
        cmd.push(' ');
        cmd.push_str(&shell_quote(flag));
    }
    cmd
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether `p` is a file someone may execute.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What `askbus doctor` finds of askbus's hook for an agent.
#[derive(Debug)]
pub enum Installed {
    /// Neither the agent's program on PATH nor its settings file.
    NoAgent(PathBuf),
    /// The agent is there; its settings file has no askbus hook.
    Missing(PathBuf),
    /// The settings file cannot be read or is not JSON.
    Unreadable(PathBuf, String),
    /// askbus's hook, under the event it belongs to, running `command`.
    Found { path: PathBuf, command: String },
}

/// Looks for askbus's hook in `agent`'s user settings file, under the event --install uses.
pub fn installed(agent: Agent) -> Installed {
    let path = match default_settings(agent) {
        Ok(p) => p,
        Err(e) => return Installed::Unreadable(PathBuf::from("~"), e.to_string()),
    };
    if !path.exists() && which(agent.name()).is_none() {
        return Installed::NoAgent(path);
    }
    let settings = match read(&path) {
        Ok((_, v)) => v,
        Err(e) => return Installed::Unreadable(path, e.to_string()),
    };
    let command = settings
        .pointer(&format!("/hooks/{}", event_key(agent)))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("hooks").and_then(Value::as_array))
        .flatten()
        .filter_map(|h| h.get("command").and_then(Value::as_str))
        .find(|c| is_ours(agent, c));
    match command {
        Some(c) => Installed::Found {
            path,
            command: c.to_owned(),
        },
        None => Installed::Missing(path),
    }
}

/// askbus's matcher group for `agent`, running `command`.
pub fn entry(agent: Agent, command: &str) -> Value {
    agent.hook().entry(command, WAITING)
}

/// The settings entry --print-config shows: `{"hooks": {EVENT: [entry]}}`.
pub fn config(agent: Agent, socket: &Path, flags: &[String]) -> Value {
    json!({"hooks": {event_key(agent): [entry(agent, &command_line(agent, socket, flags))]}})
}

/// Whether a hook command is askbus's hook for `agent`, whatever path, quoting or flags it
/// runs with: an `askbus` program word, then `hook AGENT`.
fn is_ours(agent: Agent, command: &str) -> bool {
    let unquoted = command.replace(['\'', '"'], "");
    let words: Vec<&str> = unquoted.split_whitespace().collect();
    let program = words
        .iter()
        .position(|w| *w == "askbus" || w.ends_with("/askbus"));
    program.is_some_and(|p| {
        words[p..]
            .windows(2)
            .any(|w| w[0] == "hook" && w[1] == agent.name())
    })
}

/// `settings` without askbus's hooks for `agent` (groups and events left empty are dropped);
/// whether there were any.
pub fn without(agent: Agent, settings: &mut Value, path: &Path) -> Result<bool, SetupError> {
    let shape = |what: &str| SetupError::Shape {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    let Some(obj) = settings.as_object_mut() else {
        return Err(shape("a non-object"));
    };
    let Some(hooks) = obj.get_mut("hooks") else {
        return Ok(false);
    };
    let Some(events) = hooks.as_object_mut() else {
        return Err(shape("a `hooks` that is not an object"));
    };
    let mut removed = false;
    for groups in events.values_mut() {
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        for group in groups.iter_mut() {
            if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                let before = list.len();
                list.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| is_ours(agent, c))
                });
                removed |= list.len() != before;
            }
        }
        groups.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|l| !l.is_empty())
        });
    }
    events.retain(|_, g| g.as_array().is_none_or(|g| !g.is_empty()));
    if events.is_empty() {
        obj.remove("hooks");
    }
    Ok(removed)
}

/// `settings` with askbus's entry for `agent` (an older one replaced).
pub fn with(
    agent: Agent,
    settings: &mut Value,
    path: &Path,
    command: &str,
) -> Result<(), SetupError> {
    without(agent, settings, path)?;
    let obj = settings.as_object_mut().expect("checked by without");
    let hooks = obj
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let events = hooks.as_object_mut().expect("checked by without");
    let groups = events
        .entry(event_key(agent))
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(groups) = groups.as_array_mut() else {
        return Err(SetupError::Shape {
            path: path.to_owned(),
            what: format!("a `hooks.{}` that is not an array", event_key(agent)),
        });
    };
    groups.push(entry(agent, command));
    Ok(())
}

/// Reads a settings file: `{}` when there is none.
fn read(path: &Path) -> Result<(String, Value), SetupError> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok((text, json!({}))),
        Ok(text) => {
            let v = serde_json::from_str(&text).map_err(|source| SetupError::NotJson {
                path: path.to_owned(),
                source,
            })?;
            Ok((text, v))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), json!({}))),
        Err(source) => Err(SetupError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes `text` over `path` (through a symlink to its target) by a rename, keeping the
/// file's mode; the old contents, if any, first go to a backup beside it, whose path is
/// returned.
fn replace(path: &Path, old: &str, text: &str) -> Result<Option<PathBuf>, SetupError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| SetupError::Write { path, source }
    };
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    let mode = std::fs::metadata(&target)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let backup = if std::fs::metadata(&target).is_ok() {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let (backup, mut f) = new_backup(&target, secs, mode)?;
        f.write_all(old.as_bytes()).map_err(write_err(&backup))?;
        Some(backup)
    } else {
        None
    };
    let tmp = dir.join(format!(
        ".{}.askbus-{}",
        target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(write_err(&tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(write_err(&tmp))?;
    std::fs::rename(&tmp, &target).map_err(write_err(&target))?;
    Ok(backup)
}

/// A new backup file beside `target`, created (never over another): `NAME.askbus-backup-SECS`,
/// or with `.2`, `.3`, … after it when that name is taken (installed twice in one second).
fn new_backup(target: &Path, secs: u64, mode: u32) -> Result<(PathBuf, std::fs::File), SetupError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = format!("{name}.askbus-backup-{secs}");
    for n in 1u32.. {
        let path = match n {
            1 => dir.join(&stem),
            n => dir.join(format!("{stem}.{n}")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(source) => return Err(SetupError::Write { path, source }),
        }
    }
    unreachable!("the loop returns by its 1000th name")
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON serializes");
    s.push('\n');
    s
}

/// Runs --install, --uninstall or --print-config. Exit 0 on success, 1 on failure (this is
/// the person at a terminal, not the agent: usage errors are clap's).
pub fn run(agent: Agent, args: &SetupArgs, socket: &Path, flags: &[String]) -> ExitCode {
    match setup(agent, args, socket, flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "askbus: {e}");
            ExitCode::from(crate::fail::exit::FAILURE)
        }
    }
}

fn setup(
    agent: Agent,
    args: &SetupArgs,
    socket: &Path,
    flags: &[String],
) -> Result<(), SetupError> {
    let mut out = std::io::stdout().lock();
    if args.print_config {
        let _ = write!(out, "{}", pretty(&config(agent, socket, flags)));
        return Ok(());
    }
    let path = match &args.settings {
        Some(p) => p.clone(),
        None => default_settings(agent)?,
    };
    let (old_text, mut settings) = read(&path)?;
    if args.install {
        with(
            agent,
            &mut settings,
            &path,
            &command_line(agent, socket, flags),
        )?;
    } else if !without(agent, &mut settings, &path)? {
        let _ = writeln!(
            out,
            "{}: no askbus hook for {} there; nothing to remove",
            path.display(),
            agent.name()
        );
        return Ok(());
    }
    let new_text = pretty(&settings);
    let old_value = if old_text.trim().is_empty() {
        None
    } else {
        serde_json::from_str::<Value>(&old_text).ok()
    };
    if old_value.as_ref() == Some(&settings) {
        let _ = writeln!(
            out,
            "{}: the askbus hook is already there; nothing changed",
            path.display()
        );
        return Ok(());
    }
    let diff = similar::TextDiff::from_lines(old_text.as_str(), new_text.as_str())
        .unified_diff()
        .header(&path.display().to_string(), &path.display().to_string())
        .to_string();
    let _ = write!(out, "{diff}");
    if args.dry_run {
        let _ = writeln!(out, "(--dry-run: {} not changed)", path.display());
        return Ok(());
    }
    let backup = replace(&path, &old_text, &new_text)?;
    let verb = if args.install {
        "installed in"
    } else {
        "removed from"
    };
    let _ = writeln!(
        out,
        "askbus hook {} {verb} {}",
        agent.name(),
        path.display()
    );
    if let Some(b) = backup {
        let _ = writeln!(out, "the previous file is kept as {}", b.display());
    }
    if args.install {
        let _ = writeln!(out, "{}", agent.hook().next_steps());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_is_recognized_whatever_the_path_and_flags() {
        for c in [
            "askbus hook claude",
            "/home/me/.cargo/bin/askbus --socket /s hook claude --fallback ask",
            "'/opt/my dir/askbus' hook 'claude'",
        ] {
            assert!(is_ours(Agent::Claude, c), "{c}");
        }
        for c in [
            "askbus hook gemini",
            "my-askbus hook claude",
            "claude hook askbus",
        ] {
            assert!(!is_ours(Agent::Claude, c), "{c}");
        }
    }

    #[test]
    fn install_merges_and_uninstall_restores() {
        let p = Path::new("/x/settings.json");
        let original = json!({"model": "opus", "hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}});
        let mut s = original.clone();
        with(Agent::Claude, &mut s, p, "askbus hook claude").unwrap();
        assert_eq!(s["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(
            s["hooks"]["PreToolUse"][0],
            original["hooks"]["PreToolUse"][0]
        );
        // Installing again replaces, never duplicates.
        let once = s.clone();
        with(Agent::Claude, &mut s, p, "askbus hook claude").unwrap();
        assert_eq!(s, once);
        assert!(without(Agent::Claude, &mut s, p).unwrap());
        assert_eq!(s, original);
        let mut empty = json!({});
        with(Agent::Codex, &mut empty, p, "askbus hook codex").unwrap();
        assert!(without(Agent::Codex, &mut empty, p).unwrap());
        assert_eq!(empty, json!({}));
        let mut bad = json!({"hooks": []});
        assert!(with(Agent::Gemini, &mut bad, p, "askbus hook gemini").is_err());
    }

    #[test]
    fn backups_in_one_second_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("settings.json");
        let names: Vec<PathBuf> = (0..3)
            .map(|_| new_backup(&target, 1_700_000_000, 0o600).unwrap().0)
            .collect();
        let file = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            names.iter().map(file).collect::<Vec<_>>(),
            [
                "settings.json.askbus-backup-1700000000",
                "settings.json.askbus-backup-1700000000.2",
                "settings.json.askbus-backup-1700000000.3",
            ]
        );
        // And through the whole write: two changes in a row keep two backups.
        std::fs::write(&target, "{}").unwrap();
        let first = replace(&target, "{}", "{\"a\": 1}").unwrap().unwrap();
        let second = replace(&target, "{\"a\": 1}", "{\"a\": 2}")
            .unwrap()
            .unwrap();
        assert_ne!(first, second);
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "{\"a\": 1}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{\"a\": 2}");
    }

    #[test]
    fn the_command_line_carries_the_flags_quoted() {
        let socket = askbus::client::default_socket_path();
        let flags = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = command_line(Agent::Claude, &socket, &flags(&["--fallback", "ask"]));
        assert!(c.ends_with(" hook claude --fallback ask"), "{c}");
        let c = command_line(Agent::Codex, &socket, &flags(&["--client", "my agent's"]));
        assert!(
            c.ends_with(r#" hook codex --client 'my agent'\''s'"#),
            "{c}"
        );
        let c = command_line(Agent::Gemini, Path::new("/run/x y.sock"), &[]);
        assert!(c.contains(" --socket '/run/x y.sock' hook gemini"), "{c}");
    }
}
