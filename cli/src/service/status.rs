//! `askbus service status`: what is installed for a scope, where its `ExecStart=` points,
//! and what systemd says of the socket and the service.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Result;

use super::unit::{existing, find_askbusd, is_executable, render_unit, Existing};
use super::Scope;

pub(super) fn status(scope: Scope) -> Result<ExitCode> {
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
    let drop_in = layout.federation_drop_in();
    match existing(&drop_in)? {
        Existing::Absent => {
            if !super::federation::servers_in_config(&layout.config)
                .unwrap_or_default()
                .is_empty()
            {
                writeln!(
                    out,
                    "  {}: absent, but the config sets `nats`: the service cannot reach NATS; \
                     run askbus service install {}",
                    drop_in.display(),
                    layout.scope_flag()
                )?;
            }
        }
        Existing::Ours(text) => {
            let allow = text
                .lines()
                .find_map(|l| l.strip_prefix("IPAddressAllow="))
                .map(|a| format!(", IP addresses {a}"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {}: network sockets for federation{allow} (written by askbus service install)",
                drop_in.display()
            )?;
        }
        Existing::Foreign => writeln!(
            out,
            "  {}: not written by askbus service install",
            drop_in.display()
        )?,
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
        ExitCode::from(crate::fail::exit::FAILURE)
    })
}
