//! `askbus service install` and `uninstall`: write or remove the files `unit` plans, only
//! where they are ours unless `--force`, then enable or disable through systemd (or print the
//! commands where no manager runs).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use super::unit::{existing, find_askbusd, plan, Existing};
use super::{
    federation, run_or_print, shell_line, shell_word, write_file, InstallArgs, Scope,
    UninstallArgs, EXAMPLE_CONFIG, MARKER, NOTIFIER_UNIT,
};

pub(super) fn install(args: InstallArgs) -> Result<ExitCode> {
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
    let notifier = if args.notify {
        if scope == Scope::System {
            bail!(
                "askbus notify runs per user (it needs the person's session bus): install it with \
                 `askbus service install --user --notify`"
            );
        }
        Some(std::env::current_exe().context("cannot tell where this askbus is")?)
    } else {
        None
    };
    // Federation: the servers given, else those of the config askbusd will read.
    let given = federation::parse_servers(&args.nats)?;
    let nats = if given.is_empty() {
        federation::servers_in_config(&layout.config)?
    } else {
        given.clone()
    };
    let config = if given.is_empty() {
        EXAMPLE_CONFIG.to_owned()
    } else {
        federation::config_with(EXAMPLE_CONFIG, &given)
    };
    let files = plan(&layout, &daemon, notifier.as_deref(), &nats, config)?;

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
    if notifier.is_some() {
        let notifier_changed = to_write.iter().any(|f| f.path == layout.notifier_unit());
        if args.now {
            commands.push(layout.systemctl(&["enable", "--now", NOTIFIER_UNIT]));
            if notifier_changed {
                commands.push(layout.systemctl(&["try-restart", NOTIFIER_UNIT]));
            }
        } else {
            commands.push(layout.systemctl(&["enable", NOTIFIER_UNIT]));
        }
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

    if scope == Scope::System && askbus::trust::effective_uid() != 0 {
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
    if !given.is_empty() {
        let kept = !to_write.iter().any(|w| w.path == layout.config);
        let urls = |s: &[super::federation::NatsAddr]| {
            s.iter()
                .map(|a| a.as_url_str().to_owned())
                .collect::<Vec<_>>()
        };
        if kept && urls(&federation::servers_in_config(&layout.config)?) != urls(&given) {
            writeln!(
                out,
                "note: {} is yours and was kept, and does not say these servers: set \
                 `nats = {}` there, then {}",
                layout.config.display(),
                toml::Value::Array(urls(&given).into_iter().map(toml::Value::String).collect()),
                shell_line(&layout.systemctl(&["restart", "askbusd.service"]))
            )?;
        }
    }
    if let Some(askbus) = &notifier {
        writeln!(
            out,
            "ExecStart={} notify ({NOTIFIER_UNIT})",
            askbus.display()
        )?;
    }
    run_or_print(&layout, &commands, &mut out)?;
    if args.now && !layout.manager_running() {
        // --now asked for a running daemon; nothing could start one, so say so and fail
        // rather than exit 0 having enabled nothing.
        out.flush()?;
        eprintln!(
            "askbus: --now: nothing was started or enabled, as no systemd manager runs here (a \
             container, or an SSH session without lingering). Run `askbusd` yourself, or \
             `loginctl enable-linger $USER`, log in again and rerun this command."
        );
        return Ok(ExitCode::from(crate::fail::exit::FAILURE));
    }
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

pub(super) fn uninstall(args: UninstallArgs) -> Result<ExitCode> {
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
    // The federation drop-in, if install wrote it; one the user wrote is theirs.
    let drop_in = layout.federation_drop_in();
    if matches!(existing(&drop_in)?, Existing::Ours(_)) {
        remove.push(drop_in.clone());
    }
    if scope == Scope::User {
        // The notifier's unit goes with the daemon's if install wrote it (`--notify`): it needs
        // the socket. One the user wrote is theirs and no reason to refuse.
        let notifier = layout.notifier_unit();
        if matches!(existing(&notifier)?, Existing::Ours(_)) {
            remove.push(notifier);
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
    let mut units = vec!["disable", "--now", "askbusd.socket", "askbusd.service"];
    if remove.contains(&layout.notifier_unit()) {
        units.push(NOTIFIER_UNIT);
    }
    let before = vec![layout.systemctl(&units)];
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
    if scope == Scope::System && askbus::trust::effective_uid() != 0 {
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
    if let Some(dir) = drop_in.parent() {
        // Gone only if empty: other drop-ins there are the user's.
        let _ = std::fs::remove_dir(dir);
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
