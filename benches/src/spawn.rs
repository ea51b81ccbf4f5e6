//! Starting and stopping the bench's target (askbusd, the baseline relay, or `askbus chat` on
//! a daemon's socket) in a temp dir of its own: waits for its ready line on stderr, keeps draining stderr (a full pipe would stall
//! the target's logging), and stops it with SIGTERM.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// What the relay prints once it listens, as askbusd prints "askbusd ready on PATH".
pub const RELAY_READY: &str = "askbus bench-relay ready on";
const DAEMON_READY: &str = "askbusd ready on";
/// What `askbus chat` logs once it is subscribed to the daemon.
const CHAT_READY: &str = "askbus chat: watching";

/// How long a target may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// Which process to run.
#[derive(Debug, Clone)]
pub enum Kind {
    Askbusd {
        bin: PathBuf,
        telemetry: bool,
        /// Extra flags (limits a workload needs).
        args: Vec<String>,
        /// The user tier's policy rules (a TOML file) the daemon loads; `None`: no rules of
        /// the user's own, only the shipped defaults.
        policies: Option<String>,
    },
    Relay {
        exe: PathBuf,
    },
    /// `askbus chat ARGS…` subscribed to the daemon at `socket` (its state file in the temp
    /// dir), with `env` set (the bot token: never in argv).
    Chat {
        askbus: PathBuf,
        socket: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Askbusd { .. } => "askbusd",
            Kind::Relay { .. } => "relay",
            Kind::Chat { .. } => "askbus chat",
        }
    }

    pub fn is_relay(&self) -> bool {
        matches!(self, Kind::Relay { .. })
    }

    fn ready_line(&self) -> &'static str {
        match self {
            Kind::Askbusd { .. } => DAEMON_READY,
            Kind::Relay { .. } => RELAY_READY,
            Kind::Chat { .. } => CHAT_READY,
        }
    }

    fn command(&self, dir: &Path, socket: &Path) -> Result<Command> {
        match self {
            Kind::Askbusd {
                bin,
                telemetry,
                args,
                policies,
            } => {
                // An empty config file of our own, so the user's config does not change what
                // is measured (limits, access rules, metrics).
                let config = dir.join("askbusd.toml");
                std::fs::write(&config, "")
                    .with_context(|| format!("cannot write {}", config.display()))?;
                let mut cmd = Command::new(bin);
                cmd.arg("--config").arg(config).arg("--socket").arg(socket);
                if *telemetry {
                    cmd.arg("--telemetry").arg(dir.join("telemetry.jsonl"));
                } else {
                    cmd.arg("--no-telemetry");
                }
                if !args
                    .iter()
                    .any(|a| a.starts_with("--store") || a == "--no-store")
                {
                    // Memory only unless the run asks for a store (a store is measured
                    // against memory only, side by side, with --store in the args).
                    cmd.arg("--no-store");
                }
                cmd.args(args);
                // Rules of our own too: the user's and the machine's would change which
                // approvals a person is asked about. The user tier is $XDG_CONFIG_HOME's.
                let user = dir.join("config").join("askbus").join("policies");
                std::fs::create_dir_all(&user)
                    .with_context(|| format!("cannot create {}", user.display()))?;
                if let Some(rules) = policies {
                    let file = user.join("bench.toml");
                    std::fs::write(&file, rules)
                        .with_context(|| format!("cannot write {}", file.display()))?;
                }
                cmd.env("XDG_CONFIG_HOME", dir.join("config"))
                    .arg("--policy-admin-dir")
                    .arg(dir.join("admin-policies"));
                // Its own log level: the ready line is logged at info, and a debug log
                // would be part of what is measured.
                cmd.env_remove("ASKBUS_CONFIG").env_remove("ASKBUS_LOG");
                Ok(cmd)
            }
            Kind::Relay { exe } => {
                let mut cmd = Command::new(exe);
                cmd.arg("relay").arg("--socket").arg(socket);
                Ok(cmd)
            }
            Kind::Chat {
                askbus,
                socket,
                args,
                env,
            } => {
                let mut cmd = Command::new(askbus);
                cmd.arg("chat")
                    .args(args)
                    .arg("--state")
                    .arg(dir.join("chat.json"))
                    .env("ASKBUS_SOCKET", socket)
                    .env("XDG_CONFIG_HOME", dir.join("config"))
                    .env("XDG_STATE_HOME", dir.join("state"))
                    .env_remove("ASKBUS_CONFIG")
                    .envs(env.iter().map(|(k, v)| (k, v)));
                Ok(cmd)
            }
        }
    }
}

/// A private temp directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("askbus-bench-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", dir.display()))
                }
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The last lines the target logged, for error messages.
type Log = Arc<Mutex<VecDeque<String>>>;
const LOG_LINES: usize = 20;

/// A running target, stopped (SIGKILL) when dropped unless `stop` ran.
pub struct Target {
    child: Child,
    socket: PathBuf,
    log: Log,
    ready: mpsc::Receiver<()>,
    // Last: removed after the child is gone.
    _dir: TempDir,
}

impl Target {
    /// Starts `kind` and waits for its ready line.
    pub fn start(kind: &Kind) -> Result<Target> {
        let mut t = Target::spawn(kind)?;
        t.wait_ready()?;
        Ok(t)
    }

    /// Starts `kind` without waiting for it (`wait_ready` does).
    pub fn spawn(kind: &Kind) -> Result<Target> {
        let dir = TempDir::new()?;
        let socket = match kind {
            Kind::Chat { socket, .. } => socket.clone(),
            _ => dir.0.join("askbus.sock"),
        };
        let mut cmd = kind.command(&dir.0, &socket)?;
        // Not a service: no inherited socket, no notifications, no watchdog.
        for var in [
            "LISTEN_FDS",
            "LISTEN_PID",
            "LISTEN_FDNAMES",
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
            "WATCHDOG_PID",
        ] {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
        let stderr = child.stderr.take().expect("piped stderr");
        let log: Log = Arc::default();
        let (tx, ready) = mpsc::channel();
        let marker = kind.ready_line();
        let lines = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.is_some() && line.contains(marker) {
                    let _ = tx.take().expect("checked").send(());
                }
                let mut lines = lines.lock().expect("log lock");
                if lines.len() == LOG_LINES {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });
        Ok(Target {
            child,
            socket,
            log,
            ready,
            _dir: dir,
        })
    }

    /// Waits for the ready line (the socket is listening by then).
    pub fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.ready.recv_timeout(Duration::from_millis(20)) {
                Ok(()) => return Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // stderr closed without the line: the process is exiting.
                    let status = self.child.wait()?;
                    bail!(
                        "the target exited before it was ready ({status}):\n{}",
                        self.log_tail()
                    );
                }
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the target exited before it was ready ({status}):\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the target was not ready within {READY_TIMEOUT:?}:\n{}",
                    self.log_tail()
                );
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn log_tail(&self) -> String {
        let lines = self.log.lock().expect("log lock");
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Fails if the target has died (a crash mid-run must not read as a result).
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the target died ({status}):\n{}", self.log_tail());
        }
        Ok(())
    }

    /// SIGTERM, then waits for it to exit (SIGKILL after a while).
    pub fn stop(self) -> Result<()> {
        self.stop_within(Duration::from_secs(10)).map(drop)
    }

    /// SIGTERM, then waits up to `limit` for it to exit (SIGKILL past it); how long it took.
    pub fn stop_within(mut self, limit: Duration) -> Result<Duration> {
        let started = Instant::now();
        // SAFETY: kill with the pid of a child we have not reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = started + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("the target exited with {status}:\n{}", self.log_tail());
                }
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("the target did not exit within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
