//! `askbus doctor`'s checks of the files on this machine: each agent's hook in its settings
//! file (and whether its program is found), and the daemon's config file as askbusd reads it.

use std::path::Path;

use crate::hook::install::{self as hooks, Installed};
use crate::hook::Agent;

use super::{Report, Status};

/// Each agent's hook: installed in its settings file, and runnable (its program found).
pub(super) fn hook(r: &mut Report, agent: Agent, socket: &Path) {
    let check = match agent {
        Agent::Claude => "hook:claude",
        Agent::Gemini => "hook:gemini",
        Agent::Codex => "hook:codex",
    };
    match hooks::installed(agent) {
        Installed::NoAgent(path) => r.add(
            check,
            Status::Skip,
            format!(
                "{} not found on PATH and no {}",
                agent.name(),
                path.display()
            ),
            None,
        ),
        Installed::Missing(path) => r.add(
            check,
            Status::Warn,
            format!(
                "not installed in {}: this agent asks in its own terminal only",
                path.display()
            ),
            Some(format!("`askbus hook {} --install`", agent.name())),
        ),
        Installed::Unreadable(path, e) => r.add(
            check,
            Status::Fail,
            format!("{}: {e}", path.display()),
            Some(format!(
                "fix the file's JSON, then `askbus hook {} --install`",
                agent.name()
            )),
        ),
        Installed::Found { path, command } => {
            let program = command
                .replace(['\'', '"'], "")
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned();
            let runnable = if program.contains('/') {
                crate::hook::install::is_executable(Path::new(&program))
            } else {
                crate::hook::install::which(&program).is_some()
            };
            let socket_named = command
                .split_whitespace()
                .skip_while(|w| *w != "--socket")
                .nth(1)
                .map(|s| s.replace(['\'', '"'], ""));
            if !runnable {
                r.add(
                    check,
                    Status::Fail,
                    format!(
                        "{} runs `{command}`, but `{program}` is not found: every tool call \
                         fails",
                        path.display()
                    ),
                    Some(
                        "install askbus on PATH (`cargo install --locked --path .`), then \
                         `askbus hook AGENT --install` again"
                            .replace("AGENT", agent.name()),
                    ),
                );
            } else if socket_named.is_some_and(|s| Path::new(&s) != socket) {
                r.add(
                    check,
                    Status::Warn,
                    format!(
                        "{} runs `{command}`, another socket than {}",
                        path.display(),
                        socket.display()
                    ),
                    Some(format!("`askbus hook {} --install`", agent.name())),
                );
            } else {
                r.ok(check, format!("{} runs `{command}`", path.display()));
            }
        }
    }
}

/// The daemon's config file, as askbusd itself reads it (`askbusd --check-config`): found,
/// valid, and what its federation settings expose. Asking the daemon's binary keeps the CLI
/// free of the daemon's code, and doctor can never disagree with what a start would say.
pub(super) fn config(r: &mut Report) {
    let askbusd = match crate::service::find_askbusd(None) {
        Ok(path) => path,
        Err(e) => {
            r.add("config", Status::Skip, format!("{e:#}"), None);
            return;
        }
    };
    let out = match std::process::Command::new(&askbusd)
        .args(["--check-config", "--policies", "off"])
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            r.add(
                "config",
                Status::Skip,
                format!("cannot run {}: {e}", askbusd.display()),
                None,
            );
            return;
        }
    };
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for line in stderr.lines() {
        let line = line.strip_prefix("askbusd: ").unwrap_or(line);
        match line.strip_prefix("warning: federation: ") {
            Some(w) => warnings.push(w.to_owned()),
            None if !line.trim().is_empty() => errors.push(line.to_owned()),
            None => {}
        }
    }
    if !out.status.success() {
        r.add(
            "config",
            Status::Fail,
            errors.join("; "),
            Some(
                "edit the file named (askbusd refuses to start with it), then \
                 `askbusd --check-config`"
                    .into(),
            ),
        );
    } else if warnings.is_empty() {
        r.ok("config", said.replace(": OK", ": valid"));
    } else {
        r.add(
            "config",
            Status::Warn,
            format!(
                "{}; federation: {}",
                said.replace(": OK", ": valid"),
                warnings.join("; ")
            ),
            Some(
                "use TLS and credentials ([federation] tls_ca, creds_file; require_tls = true)"
                    .into(),
            ),
        );
    }
}
