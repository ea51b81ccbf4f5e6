//! The reference's command-safety heuristics (`sandbox/utils/commandSafety.js`, used by its
//! `NoopSandboxManager` on Linux): which commands are known read-only and which dangerous.
//!
//! Kept exactly, quirks included: they read the words `shell-quote` gives for the whole
//! command, so only its first command counts (`ls && rm -rf /` is "known safe"); the daemon's
//! own compound check (see [`crate::engine`]) closes that for askbus's decisions.

use crate::paths::{self, is_subpath, resolve};
use crate::shell::split_commands;
use crate::shellquote;

/// Where a check runs: the workspace (the reference's `process.cwd()`) and the home directory.
#[derive(Debug, Clone, Default)]
pub struct Place {
    /// The workspace, absolute.
    pub workspace: String,
    /// `os.homedir()`.
    pub home: String,
    /// A Bazel-like hermetic test environment (the reference's `TEST_SRCDIR` & co.).
    pub hermetic: bool,
}

fn resolve_real_or(place: &Place, p: &str) -> String {
    paths::resolve_to_real_path(&place.workspace, p).unwrap_or_else(|| p.to_string())
}

fn is_path_escaping_workspace(place: &Place, arg: &str, root: &str, cwd: &str) -> bool {
    if arg.is_empty() {
        return false;
    }
    if arg.contains('$') || arg.contains('`') {
        return true;
    }
    let target;
    if arg == "~" || arg.starts_with("~/") || arg.starts_with("~\\") {
        target = resolve(&place.home, arg.get(2..).unwrap_or(""));
        if !is_subpath(&place.workspace, root, &target) {
            return true;
        }
    } else if arg.starts_with('~') {
        return true;
    } else if paths::is_absolute(arg) {
        target = resolve("/", arg);
        if !is_subpath(&place.workspace, root, &target) {
            return true;
        }
    } else {
        target = resolve(cwd, arg);
        if !is_subpath(&place.workspace, root, &target) {
            return true;
        }
    }
    let mut curr = target;
    while is_subpath(&place.workspace, root, &curr) && curr != paths::dirname(&curr) {
        if paths::is_symlink(&curr) {
            if let Some(real) = paths::realpath(&curr) {
                if !is_subpath(&place.workspace, root, &real) {
                    return true;
                }
            }
        }
        curr = paths::dirname(&curr);
    }
    false
}

fn is_trusted_system_path(place: &Place, file_path: &str) -> bool {
    let norm = resolve(&place.workspace, file_path);
    let norm_cwd = resolve("/", &place.workspace);
    if norm_cwd != "/" && is_subpath("/", &norm_cwd, &norm) {
        return place.hermetic;
    }
    [
        "/usr/bin",
        "/bin",
        "/usr/local/bin",
        "/opt/homebrew/bin",
        "/opt/homebrew/Cellar",
        "/usr/local/Cellar",
        "/usr/sbin",
        "/sbin",
        "/google/bin",
        "/google/src/cloud",
    ]
    .iter()
    .any(|p| norm == *p || norm.starts_with(&format!("{p}/")))
}

fn is_ripgrep(cmd: &str) -> bool {
    let b = paths::basename(cmd);
    b == "rg" || b == "rg.exe"
}

fn is_trusted_command_path(place: &Place, cmd: &str) -> bool {
    if !paths::is_absolute(cmd) {
        return false;
    }
    match paths::resolve_to_real_path(&place.workspace, cmd) {
        Some(real) => is_trusted_system_path(place, &real),
        None => false,
    }
}

/// The reference's `isKnownSafeCommand(args, cwd, workspace)`.
pub fn is_known_safe_command(place: &Place, args: &[String], cwd: &str) -> bool {
    if args.is_empty() {
        return false;
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| if a == "zsh" { "bash".into() } else { a.clone() })
        .collect();
    if is_safe_to_call_with_exec(place, &args, cwd) {
        return true;
    }
    if args.len() == 3 && args[0] == "bash" && (args[1] == "-lc" || args[1] == "-c") {
        let script = &args[2];
        if script.contains(['(', ')', '<', '>']) {
            return false;
        }
        let units: Vec<u16> = script.encode_utf16().collect();
        let commands = split_commands(&units);
        if commands.is_empty() {
            return false;
        }
        return commands.iter().all(|cmd| {
            let trimmed = crate::regex::js_trim(&String::from_utf16_lossy(cmd)).to_string();
            if trimmed.is_empty() {
                return true;
            }
            match shellquote::words(&trimmed) {
                Ok(parsed) if parsed.is_empty() => true,
                Ok(parsed) => is_safe_to_call_with_exec(place, &parsed, cwd),
                Err(_) => false,
            }
        });
    }
    false
}

const SAFE_COMMANDS: &[&str] = &[
    "__read", "__write", "cat", "cd", "cut", "echo", "expr", "false", "grep", "head", "id", "ls",
    "nl", "paste", "pwd", "rev", "seq", "stat", "tail", "tr", "true", "uname", "uniq", "wc",
    "which", "whoami", "numfmt", "tac",
];
const FILE_READING: &[&str] = &[
    "cat", "head", "tail", "tac", "nl", "stat", "wc", "cut", "paste", "rev", "uniq", "numfmt",
    "ls", "__read",
];
const FIND_UNSAFE: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf",
];

/// The `-f FILE` / `--file=FILE` option of grep and rg: the file it names, and whether the
/// next word was consumed.
fn file_option(args: &[String], i: &mut usize) -> Option<String> {
    let arg = &args[*i];
    if let Some(v) = arg.strip_prefix("--file=") {
        Some(v.to_string())
    } else if arg == "--file" {
        *i += 1;
        args.get(*i).cloned()
    } else if arg.chars().count() > 2 {
        Some(arg.chars().skip(2).collect())
    } else {
        *i += 1;
        args.get(*i).cloned()
    }
}

/// The shared argument walk of the file readers, grep and rg.
fn path_args_stay_inside(
    place: &Place,
    args: &[String],
    ws: &str,
    cwd: &str,
    file_opts: bool,
) -> bool {
    let mut passed_double_dash = false;
    let mut i = 1;
    while i < args.len() {
        let arg = &args[i];
        if !passed_double_dash {
            if arg == "--" {
                passed_double_dash = true;
                i += 1;
                continue;
            }
            if arg == "-" && !file_opts {
                i += 1;
                continue;
            }
            if file_opts && arg == "-" {
                i += 1;
                continue;
            }
            if file_opts && (arg.starts_with("-f") || arg.starts_with("--file")) {
                if let Some(f) = file_option(args, &mut i) {
                    if !f.is_empty() && is_path_escaping_workspace(place, &f, ws, cwd) {
                        return false;
                    }
                }
                i += 1;
                continue;
            }
            if arg.starts_with('-') {
                if let Some(eq) = arg.find('=') {
                    if is_path_escaping_workspace(place, &arg[eq + 1..], ws, cwd) {
                        return false;
                    }
                    i += 1;
                    continue;
                }
                if !paths::lstat_exists(&resolve(cwd, arg)) {
                    i += 1;
                    continue;
                }
            }
        }
        if is_path_escaping_workspace(place, arg, ws, cwd) {
            return false;
        }
        i += 1;
    }
    true
}

fn is_safe_to_call_with_exec(place: &Place, args: &[String], cwd: &str) -> bool {
    if args.is_empty() {
        return false;
    }
    let cmd = args[0].as_str();
    let ws = resolve_real_or(place, &resolve(&place.workspace, &place.workspace));
    let cwd_abs = if cwd.is_empty() {
        ws.clone()
    } else {
        resolve(&place.workspace, cwd)
    };
    let cwd = resolve_real_or(place, &cwd_abs);
    if cwd != ws && !is_subpath(&place.workspace, &ws, &cwd) {
        return false;
    }
    let ws = ws.as_str();
    let cwd = cwd.as_str();
    if SAFE_COMMANDS.contains(&cmd) {
        if cmd == "cd" {
            let mut has_path = false;
            for arg in &args[1..] {
                if arg.starts_with('-') {
                    continue;
                }
                has_path = true;
                if is_path_escaping_workspace(place, arg, ws, cwd) {
                    return false;
                }
            }
            if !has_path && is_path_escaping_workspace(place, "~", ws, cwd) {
                return false;
            }
            return true;
        }
        if FILE_READING.contains(&cmd) {
            return path_args_stay_inside(place, args, ws, cwd, false);
        }
        if cmd == "grep" {
            return path_args_stay_inside(place, args, ws, cwd, true);
        }
        return true;
    }
    if cmd == "base64" {
        if args[1..].iter().any(|a| {
            // `-o`, or `-oFILE`: the reference's test reduces to "starts with -o".
            a == "--output" || a.starts_with("--output=") || a.starts_with("-o")
        }) {
            return false;
        }
        return args[1..]
            .iter()
            .filter(|a| !a.starts_with('-'))
            .all(|a| !is_path_escaping_workspace(place, a, ws, cwd));
    }
    if cmd == "find" {
        if args.iter().any(|a| FIND_UNSAFE.contains(&a.as_str())) {
            return false;
        }
        return args[1..]
            .iter()
            .filter(|a| !a.starts_with('-'))
            .all(|a| !is_path_escaping_workspace(place, a, ws, cwd));
    }
    if is_ripgrep(cmd) {
        if !is_trusted_command_path(place, cmd) {
            return false;
        }
        if rg_has_unsafe_option(args) {
            return false;
        }
        return path_args_stay_inside(place, args, ws, cwd, true);
    }
    if cmd == "git" {
        if git_has_config_override(args) {
            return false;
        }
        let Some((idx, sub)) = find_git_subcommand(args) else {
            return false;
        };
        let sub_args = &args[idx + 1..];
        if ["status", "log", "diff", "show"].contains(&sub) {
            return git_args_read_only(sub_args);
        }
        if sub == "branch" {
            return git_args_read_only(sub_args) && git_branch_read_only(sub_args);
        }
        return false;
    }
    if cmd == "sed" {
        if args.len() <= 4
            && args.get(1).is_some_and(|a| a == "-n")
            && args.get(2).is_some_and(|a| valid_sed_n(a))
        {
            if let Some(a3) = args.get(3) {
                if !a3.is_empty() && is_path_escaping_workspace(place, a3, ws, cwd) {
                    return false;
                }
            }
            return true;
        }
        return false;
    }
    false
}

fn rg_has_unsafe_option(args: &[String]) -> bool {
    args[1..].iter().any(|a| {
        a == "--search-zip"
            || a == "-z"
            || ["--pre", "--hostname-bin"]
                .iter()
                .any(|o| a == o || a.starts_with(&format!("{o}=")))
    })
}

fn find_git_subcommand(args: &[String]) -> Option<(usize, &'static str)> {
    const SUBS: [&str; 5] = ["status", "log", "diff", "show", "branch"];
    let mut skip_next = false;
    for (idx, arg) in args.iter().enumerate().skip(1) {
        if skip_next {
            skip_next = false;
            continue;
        }
        let a = arg.as_str();
        if [
            "--config-env=",
            "--exec-path=",
            "--git-dir=",
            "--namespace=",
            "--super-prefix=",
            "--work-tree=",
        ]
        .iter()
        .any(|p| a.starts_with(p))
            || ((a.starts_with("-C") || a.starts_with("-c")) && a.chars().count() > 2)
        {
            continue;
        }
        if [
            "-C",
            "-c",
            "--config-env",
            "--exec-path",
            "--git-dir",
            "--namespace",
            "--super-prefix",
            "--work-tree",
        ]
        .contains(&a)
        {
            skip_next = true;
            continue;
        }
        if a == "--" || a.starts_with('-') {
            continue;
        }
        return SUBS.iter().find(|s| **s == a).map(|s| (idx, *s));
    }
    None
}

fn git_has_config_override(args: &[String]) -> bool {
    args.iter().any(|a| {
        a == "-c"
            || a == "--config-env"
            || (a.starts_with("-c") && a.chars().count() > 2)
            || a.starts_with("--config-env=")
    })
}

fn git_args_read_only(args: &[String]) -> bool {
    !args.iter().any(|a| {
        [
            "--output",
            "--ext-diff",
            "--textconv",
            "--exec",
            "--paginate",
        ]
        .contains(&a.as_str())
            || a.starts_with("--output=")
            || a.starts_with("--exec=")
    })
}

fn git_branch_read_only(args: &[String]) -> bool {
    if args.is_empty() {
        return true;
    }
    let mut saw = false;
    for a in args {
        if [
            "--list",
            "-l",
            "--show-current",
            "-a",
            "--all",
            "-r",
            "--remotes",
            "-v",
            "-vv",
            "--verbose",
        ]
        .contains(&a.as_str())
            || a.starts_with("--format=")
        {
            saw = true;
        } else {
            return false;
        }
    }
    saw
}

fn valid_sed_n(arg: &str) -> bool {
    let Some(core) = arg.strip_suffix('p') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = core.split(',').collect();
    match parts.as_slice() {
        [n] => digits(n),
        [a, b] => digits(a) && digits(b),
        _ => false,
    }
}

/// The reference's `isDangerousCommand(args)`.
pub fn is_dangerous_command(args: &[String]) -> bool {
    let Some(cmd) = args.first() else {
        return false;
    };
    let cmd = cmd.as_str();
    if cmd == "ln"
        && args.iter().any(|a| {
            a == "-s"
                || a == "--symbolic"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('s'))
        })
    {
        return true;
    }
    if cmd == "rm" {
        return matches!(args.get(1).map(String::as_str), Some("-f" | "-rf" | "-fr"));
    }
    if cmd == "sudo" {
        return is_dangerous_command(&args[1..]);
    }
    if cmd == "find" {
        return args.iter().any(|a| FIND_UNSAFE.contains(&a.as_str()));
    }
    if is_ripgrep(cmd) {
        return rg_has_unsafe_option(args);
    }
    if cmd == "git" {
        if git_has_config_override(args) {
            return true;
        }
        let Some((idx, sub)) = find_git_subcommand(args) else {
            return false;
        };
        let sub_args = &args[idx + 1..];
        if ["status", "log", "diff", "show"].contains(&sub) {
            return !git_args_read_only(sub_args);
        }
        if sub == "branch" {
            return !(git_args_read_only(sub_args) && git_branch_read_only(sub_args));
        }
        return false;
    }
    if cmd == "base64" {
        return args[1..].iter().any(|a| {
            // `-o`, or `-oFILE`: the reference's test reduces to "starts with -o".
            a == "--output" || a.starts_with("--output=") || a.starts_with("-o")
        });
    }
    false
}

/// The reference's `containsGitCommand(words)`.
pub fn contains_git_command(args: &[String]) -> bool {
    const PRED: [&str; 10] = ["sudo", "env", "time", "&&", "||", ";", "|", "&", "(", "\\n"];
    let assignment = |s: &str| {
        let mut chars = s.chars();
        match chars.next() {
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
            _ => return false,
        }
        for c in chars {
            if c == '=' {
                return true;
            }
            if !(c.is_ascii_alphanumeric() || c == '_') {
                return false;
            }
        }
        false
    };
    args.iter().enumerate().any(|(index, arg)| {
        let trimmed = crate::regex::js_trim(arg);
        if trimmed.is_empty() {
            return false;
        }
        let base = paths::basename(trimmed).to_lowercase();
        if base != "git" && base != "git.exe" {
            return false;
        }
        let mut prev = index as isize - 1;
        while prev >= 0 && assignment(&args[prev as usize]) {
            prev -= 1;
        }
        if prev >= 0 && !PRED.contains(&args[prev as usize].to_lowercase().as_str()) {
            return false;
        }
        true
    })
}
