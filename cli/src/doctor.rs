//! `askbus doctor`: what a newcomer needs to know when nothing seems to happen. Each check
//! prints one line (`ok`, `warn`, `FAIL`, or `--` for what does not apply) and, for a
//! problem, the command that fixes it: the daemon and whether systemd runs it, the socket's
//! owner and mode, the UIs subscribed (and the notifier among them), each agent's hook, the
//! config file, the policy rules, the store and its history chain, and the link to NATS.
//! Exit status 1 when any check FAILs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args as ClapArgs;
use serde::Serialize;
use serde_json::{Map, Value};

use askbus::client::Connection;

use crate::hook::install::{self as hooks, Installed};
use crate::hook::Agent;
use crate::term;

#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The checks as a JSON array of {check, status, detail, fix}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
    /// Does not apply here (no daemon to ask, an agent that is not installed).
    Skip,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

#[derive(Default)]
struct Report(Vec<Check>);

impl Report {
    fn add(&mut self, check: &'static str, status: Status, detail: String, fix: Option<String>) {
        self.0.push(Check {
            check,
            status,
            detail,
            fix,
        });
    }
    fn ok(&mut self, check: &'static str, detail: String) {
        self.add(check, Status::Ok, detail, None);
    }
}

pub async fn run(socket: &Path, args: Args) -> Result<ExitCode> {
    let mut r = Report::default();
    let stats = daemon(&mut r, socket).await;
    socket_mode(&mut r, socket);
    match &stats {
        Some(s) => {
            uis(&mut r, s);
            policies(&mut r, s);
            store(&mut r, Some(s));
            federation(&mut r, s);
        }
        None => {
            for check in ["uis", "notifier", "policies", "federation"] {
                r.add(
                    check,
                    Status::Skip,
                    "not known: askbusd is not reachable".into(),
                    None,
                );
            }
            store(&mut r, None);
        }
    }
    for agent in [Agent::Claude, Agent::Gemini, Agent::Codex] {
        hook(&mut r, agent, socket);
    }
    config(&mut r);
    let failed = r.0.iter().any(|c| c.status == Status::Fail);
    if args.json {
        println!("{}", term::json(&serde_json::to_string_pretty(&r.0)?));
    } else {
        for c in &r.0 {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
                Status::Skip => "--  ",
            };
            println!("{mark} {:<11} {}", c.check, term::sanitize_lines(&c.detail));
            if let Some(fix) = &c.fix {
                println!("     {:<11} fix: {}", "", term::sanitize_lines(fix));
            }
        }
        let problems =
            r.0.iter()
                .filter(|c| matches!(c.status, Status::Warn | Status::Fail))
                .count();
        println!(
            "{}",
            match problems {
                0 => "Nothing to fix.".to_owned(),
                1 => "1 thing to look at (above).".to_owned(),
                n => format!("{n} things to look at (above)."),
            }
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Reaches askbusd: its version and node, whether systemd runs it; the stats frame for the
/// checks that follow.
async fn daemon(r: &mut Report, socket: &Path) -> Option<Map<String, Value>> {
    let reached = tokio::time::timeout(Duration::from_secs(5), async {
        let mut conn = Connection::connect(socket).await?;
        let stats = conn.stats().await?;
        Ok::<_, askbus::client::ClientError>(stats)
    })
    .await;
    let stats = match reached {
        Ok(Ok(stats)) => stats,
        Ok(Err(e)) => {
            let (text, hint, _) = crate::fail::describe(&e.into());
            let fix = match hint {
                Some(h) => h.to_owned(),
                None => "start it: `askbusd` in a terminal, or `askbus service install --now` \
                         to run it whenever you log in"
                    .to_owned(),
            };
            r.add("daemon", Status::Fail, text, Some(fix));
            return None;
        }
        Err(_) => {
            r.add(
                "daemon",
                Status::Fail,
                format!("askbusd at {} did not answer in 5 s", socket.display()),
                Some(
                    "restart it: `systemctl --user restart askbusd`, or stop and start `askbusd`"
                        .into(),
                ),
            );
            return None;
        }
    };
    let server = stats
        .get("server")
        .and_then(Value::as_str)
        .unwrap_or("askbusd");
    let node = stats.get("node").and_then(Value::as_str).unwrap_or("?");
    let how = match service_unit(socket) {
        Some(unit) => format!("run by systemd ({unit})"),
        None => "started by hand, not as a service".to_owned(),
    };
    let detail = format!("{server} on {} (node {node}), {how}", socket.display());
    if how.starts_with("run by") {
        r.ok("daemon", detail);
    } else {
        r.add(
            "daemon",
            Status::Ok,
            detail,
            Some("to have it whenever you log in: `askbus service install --now`".into()),
        );
    }
    if stats.get("scope").and_then(Value::as_str) == Some("own") {
        r.add(
            "daemon",
            Status::Warn,
            "askbusd runs as another user and shows you only your own counters".into(),
            None,
        );
    }
    Some(stats)
}

/// The systemd unit the daemon serving `socket` runs in, from its cgroup (none for one started
/// by hand in a terminal).
fn service_unit(socket: &Path) -> Option<String> {
    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    let pid = peer_pid(&stream)?;
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroup
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|unit| unit.ends_with(".service") && unit.starts_with("askbus"))
        .map(str::to_owned)
}

fn peer_pid(stream: &std::os::unix::net::UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and a buffer of the size given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// The socket's owner and mode, and its directory (another user must not be able to replace
/// it).
fn socket_mode(r: &mut Report, socket: &Path) {
    let meta = match std::fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) => {
            r.add(
                "socket",
                Status::Skip,
                format!("{}: {e}", socket.display()),
                None,
            );
            return;
        }
    };
    let mode = meta.permissions().mode() & 0o777;
    let own = askbus::trust::effective_uid();
    let detail = format!(
        "{} (mode {mode:04o}, owner uid {})",
        socket.display(),
        meta.uid()
    );
    if mode & 0o007 != 0 {
        r.add(
            "socket",
            Status::Fail,
            format!("{detail}: other users may connect"),
            Some(format!(
                "`chmod o-rwx {}`, and let askbusd create its socket (it makes it 0600)",
                socket.display()
            )),
        );
        return;
    }
    if let Some(dir) = socket.parent() {
        let problem = askbus::trust::unsafe_socket_dir(dir, meta.uid())
            .unwrap_or_else(|e| Some(format!("cannot be read ({e})")));
        if let Some(why) = problem {
            r.add(
                "socket",
                Status::Fail,
                format!("{detail}: its directory {} {why}", dir.display()),
                Some(format!(
                    "`chmod 700 {}`, or point ASKBUS_SOCKET at a directory only you can write",
                    dir.display()
                )),
            );
            return;
        }
    }
    if meta.uid() != own && meta.uid() != 0 {
        r.add(
            "socket",
            Status::Warn,
            format!("{detail}: not yours; askbus talks to it only with ASKBUS_DAEMON_UID set"),
            None,
        );
        return;
    }
    r.ok("socket", detail);
}

/// The UIs subscribed on this node (another node's UIs are not counted: a hook hands its call
/// back when none is here), and whether the notifier is one of them.
fn uis(r: &mut Report, stats: &Map<String, Value>) {
    let subs: Vec<&Value> = stats
        .get("subscribers")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let n = stats
        .get("uis")
        .and_then(Value::as_u64)
        .unwrap_or(subs.len() as u64);
    if n == 0 {
        r.add(
            "uis",
            Status::Warn,
            "no UI is subscribed: agents' hooks hand their calls back to the agent's own \
             prompt, and `askbus ask` waits"
                .into(),
            Some(
                "`askbus ui` (a terminal), `askbus web --open` (a browser), `askbus notify` \
                 (desktop and phone)"
                    .into(),
            ),
        );
    } else {
        let names: Vec<String> = subs
            .iter()
            .map(|s| {
                let client = s
                    .get("client")
                    .and_then(Value::as_str)
                    .unwrap_or("a client");
                let via = s.get("via").and_then(Value::as_str).unwrap_or("client");
                match s.get("pid").and_then(Value::as_i64) {
                    Some(pid) => format!("{client} ({via}, pid {pid})"),
                    None => format!("{client} ({via})"),
                }
            })
            .collect();
        let list = if names.is_empty() {
            String::new()
        } else {
            format!(": {}", names.join(", "))
        };
        r.ok(
            "uis",
            format!("{n} UI{} subscribed{list}", if n == 1 { "" } else { "s" }),
        );
    }
    // By the kind it claims, or by the name `askbus notify` subscribes with.
    let notifier = subs.iter().any(|s| {
        s.get("via").and_then(Value::as_str) == Some("notify")
            || s.get("client")
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with("askbus-notify/"))
    });
    if notifier {
        r.ok("notifier", "askbus notify is running".into());
    } else {
        r.add(
            "notifier",
            Status::Warn,
            "askbus notify is not running: nothing tells you (desktop, phone) that an agent waits"
                .into(),
            Some("`askbus service install --notify --now` (or run `askbus notify`)".into()),
        );
    }
}

fn policies(r: &mut Report, stats: &Map<String, Value>) {
    let Some(p) = stats.get("policies") else {
        r.add(
            "policies",
            Status::Skip,
            "this askbusd does not say (an older version)".into(),
            None,
        );
        return;
    };
    if p.get("enabled") != Some(&Value::Bool(true)) {
        r.ok(
            "policies",
            "off: every approval is asked of a person (askbusd --policies on to use rules)".into(),
        );
        return;
    }
    let errors: Vec<&str> = p
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if errors.is_empty() {
        r.ok(
            "policies",
            "loaded without errors (`askbus policy list` shows the rules)".into(),
        );
    } else {
        r.add(
            "policies",
            Status::Warn,
            format!(
                "{} rule file error{} (those files' rules are not in force): {}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                errors.join("; ")
            ),
            Some("fix the file, then `askbusd --check-config` and `systemctl --user reload askbusd` (or SIGHUP)".into()),
        );
    }
}

/// The store the daemon uses (or, with no daemon, the default file): whether it accepts
/// writes, and whether its history chain verifies.
fn store(r: &mut Report, stats: Option<&Map<String, Value>>) {
    let path: PathBuf = match stats.and_then(|s| s.get("store")) {
        Some(s) if s.get("enabled") == Some(&Value::Bool(false)) => {
            r.ok(
                "store",
                "off (--no-store): nothing is kept across restarts".into(),
            );
            return;
        }
        Some(s) => {
            if s.get("available") == Some(&Value::Bool(false)) {
                r.add(
                    "store",
                    Status::Fail,
                    "askbusd cannot write its store: new requests are refused store-unavailable"
                        .into(),
                    Some("free disk space where the store is (it recovers by itself)".into()),
                );
            }
            match s.get("path").and_then(Value::as_str) {
                Some(p) => PathBuf::from(p),
                None => askbus::history::default_store_path(),
            }
        }
        None => askbus::history::default_store_path(),
    };
    if !path.exists() {
        let detail = format!("no store file at {}", path.display());
        r.add("store", Status::Skip, detail, None);
        return;
    }
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    );
    let checked = conn.and_then(|c| {
        c.busy_timeout(Duration::from_secs(5))?;
        askbus::history::store::verify(&c)
    });
    match checked {
        Ok(Ok(n)) => r.ok(
            "store",
            format!("{}: the history chain verifies ({n} records)", path.display()),
        ),
        Ok(Err(broken)) => r.add(
            "store",
            Status::Fail,
            format!("{}: the history chain does not verify: {broken}", path.display()),
            Some("the record was changed outside askbusd: `askbus history verify`, and keep the file as evidence".into()),
        ),
        Err(e) => r.add(
            "store",
            Status::Fail,
            format!("{}: cannot read it: {e}", path.display()),
            Some(format!("check its owner and mode: `ls -l {}`", path.display())),
        ),
    }
}

fn federation(r: &mut Report, stats: &Map<String, Value>) {
    let Some(f) = stats.get("federation") else {
        r.add(
            "federation",
            Status::Skip,
            "off (askbusd --nats URL joins other machines)".into(),
            None,
        );
        return;
    };
    let node = f.get("node").and_then(Value::as_str).unwrap_or("?");
    let nodes: Vec<&str> = f
        .get("nodes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if f.get("connected") == Some(&Value::Bool(true)) {
        r.ok(
            "federation",
            format!(
                "connected to NATS as node {node}; other nodes: {}",
                if nodes.is_empty() {
                    "none yet".to_owned()
                } else {
                    nodes.join(", ")
                }
            ),
        );
    } else {
        r.add(
            "federation",
            Status::Fail,
            format!("node {node} is not connected to NATS (the local bus works; other machines see nothing)"),
            Some("the reason is in askbusd's log (`journalctl --user -u askbusd`); under systemd the unit must allow network sockets: `askbus service install --nats URL`".into()),
        );
    }
}

/// Each agent's hook: installed in its settings file, and runnable (its program found).
fn hook(r: &mut Report, agent: Agent, socket: &Path) {
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
fn config(r: &mut Report) {
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
