//! The files install writes: the shipped units rendered with our header and an `ExecStart=`
//! that runs the askbusd actually found, and what already stands at each path (ours, someone
//! else's, nothing), which decides whether install may rewrite it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::{Layout, MARKER, SYSUSERS};

/// What stands at a unit's path today.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Existing {
    Absent,
    /// Ours, with this text.
    Ours(String),
    /// Written by someone else (a package, an admin, a copy of systemd/).
    Foreign,
}

pub(super) fn existing(path: &Path) -> Result<Existing> {
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
pub(super) fn render_unit(template: &str, daemon: &Path, scope_flag: &str) -> Result<String> {
    render_with(template, &exec_path(daemon)?, "askbusd", scope_flag)
}

/// The notifier's user unit with our header and `ExecStart=` running `askbus notify` from
/// `askbus` (this program, wherever the user installed it: the shipped `/usr/bin/askbus` is
/// only right for the .deb).
pub(super) fn render_notifier(askbus: &Path) -> Result<String> {
    let exec = format!("{} notify", exec_path(askbus)?);
    render_with(super::USER_NOTIFY, &exec, "askbus-notify", "--user")
}

fn render_with(template: &str, exec: &str, unit: &str, scope_flag: &str) -> Result<String> {
    let mut out = format!(
        "{MARKER} {scope_flag}` (askbus {}).\n\
         # Install rewrites it and `askbus service uninstall {scope_flag}` removes it; put your\n\
         # changes in a drop-in (`systemctl{} edit {unit}`), which survives both.\n",
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
            out.push_str(exec);
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
pub(super) fn exec_path(path: &Path) -> Result<String> {
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
pub(crate) fn find_askbusd(given: Option<&Path>) -> Result<PathBuf> {
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

pub(super) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A file install means to write.
pub(super) struct Planned {
    pub(super) path: PathBuf,
    pub(super) text: String,
    /// Units and the sysusers entry are ours to rewrite; a config is the user's once written.
    pub(super) ours: bool,
}

/// What install would write for `layout` running `daemon`: with `notifier` (this `askbus`)
/// the notifier's user unit too, with `nats` servers the federation drop-in; `config` is the
/// config file to write where there is none.
pub(super) fn plan(
    layout: &Layout,
    daemon: &Path,
    notifier: Option<&Path>,
    nats: &[super::federation::NatsAddr],
    config: String,
) -> Result<Vec<Planned>> {
    let flag = layout.scope_flag();
    let mut files = Vec::new();
    for (path, template) in layout.units() {
        files.push(Planned {
            path,
            text: render_unit(template, daemon, flag)?,
            ours: true,
        });
    }
    if !nats.is_empty() {
        let resolv_conf = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        files.push(Planned {
            path: layout.federation_drop_in(),
            text: super::federation::drop_in(layout.scope, nats, &resolv_conf)?,
            ours: true,
        });
    }
    if let Some(askbus) = notifier {
        files.push(Planned {
            path: layout.notifier_unit(),
            text: render_notifier(askbus)?,
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
        text: config,
        ours: false,
    });
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{MARKER, SYSTEM_SERVICE, USER_SERVICE};

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
}
