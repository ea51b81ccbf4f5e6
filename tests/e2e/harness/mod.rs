//! The one integration-test harness: starts the real `askbusd` binary on a temp socket and
//! speaks raw frames to it, so every test exercises exactly what peers see on the wire.

pub mod clients;
pub mod nats;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// How long a test waits for a frame it expects before failing.
pub const RECV_TIMEOUT: Duration = Duration::from_secs(10);

pub fn daemon_bin() -> &'static str {
    env!("CARGO_BIN_EXE_askbusd")
}

/// Copies an executable for a test to run, by a `cp` child: a copy written by this process
/// holds a write descriptor that a child another test thread forks at that moment inherits
/// until it execs, and running the copy then fails with ETXTBSY ("Text file busy").
pub fn copy_executable(from: impl AsRef<std::path::Path>, to: impl AsRef<std::path::Path>) {
    let status = std::process::Command::new("cp")
        .arg(from.as_ref())
        .arg(to.as_ref())
        .status()
        .expect("run cp");
    assert!(status.success(), "cp {:?} {:?}", from.as_ref(), to.as_ref());
}

pub fn cli_bin() -> &'static str {
    env!("CARGO_BIN_EXE_askbus")
}

/// `askbus-bench`, which `askbus bench` runs: a package of its own (the baselines stay out of
/// what ships), so Cargo does not build it for this test binary. It is looked for where
/// `askbus bench` looks first, beside `askbus`; `cargo build -p askbus-bench` (or
/// `--workspace --bins`, as scripts/test.sh does) puts it there.
pub fn bench_bin() -> PathBuf {
    let bin = Path::new(cli_bin()).with_file_name("askbus-bench");
    assert!(
        bin.is_file(),
        "no {}: build it first with `cargo build -p askbus-bench` (the same profile as this test)",
        bin.display()
    );
    bin
}

/// A running daemon in its own temp directory, stopped when dropped.
pub struct Daemon {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub telemetry: PathBuf,
    pub log: PathBuf,
    /// The config file `--config` names, when the test gave one.
    pub config: PathBuf,
    args: Vec<String>,
    /// Variables to set (`Some`) or remove (`None`), after the harness's own.
    env: Vec<(String, Option<std::ffi::OsString>)>,
    /// A command askbusd runs under (e.g. systemd-socket-activate), which then owns the
    /// socket: no --socket is passed.
    wrapper: Vec<String>,
    /// The log line that says the socket accepts connections.
    ready_line: String,
    /// Tell askbusd its stderr (the log file) is the journal, as systemd does.
    journal: bool,
    /// RLIMIT_NOFILE to run the daemon under, if any.
    nofile: Option<u64>,
}

/// How to start a daemon: flags, environment, a config file, a wrapper command.
#[derive(Default)]
pub struct Builder {
    args: Vec<String>,
    env: Vec<(String, std::ffi::OsString)>,
    config: Option<String>,
    wrapper: Vec<String>,
    ready_line: Option<String>,
    journal: bool,
    nofile: Option<u64>,
    unset: Vec<String>,
}

impl Builder {
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    pub fn env(mut self, key: &str, value: impl Into<std::ffi::OsString>) -> Self {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    /// Removes a variable the harness sets (e.g. ASKBUS_LOG, so the config file's log_level
    /// counts).
    pub fn env_remove(mut self, key: &str) -> Self {
        self.unset.push(key.to_owned());
        self
    }

    /// Writes `text` as the config file and passes `--config` to it.
    pub fn config(mut self, text: &str) -> Self {
        self.config = Some(text.to_owned());
        self
    }

    /// Runs askbusd as `wrapper... askbusd ARGS` (`{socket}` in the wrapper and the args is
    /// replaced by the socket path); the wrapper then provides the socket.
    pub fn wrapper(mut self, wrapper: &[&str]) -> Self {
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Sets JOURNAL_STREAM to the log file's device and inode, as systemd does for a
    /// service whose stderr is the journal.
    pub fn journal(mut self) -> Self {
        self.journal = true;
        self
    }

    /// Waits for this log line instead of askbusd's ready line (a wrapper that starts
    /// askbusd only on the first connection says when it listens).
    pub fn ready_line(mut self, line: &str) -> Self {
        self.ready_line = Some(line.to_owned());
        self
    }

    pub fn start(self) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("askbus-test-")
            .tempdir()
            .expect("temp dir");
        let socket = dir.path().join("askbus.sock");
        let config = dir.path().join("askbusd.toml");
        let mut args: Vec<String> = self
            .args
            .iter()
            .map(|a| a.replace("{socket}", &socket.display().to_string()))
            .collect();
        if let Some(text) = &self.config {
            std::fs::write(&config, text).expect("write config");
            args.push("--config".into());
            args.push(config.display().to_string());
        }
        let wrapper = self
            .wrapper
            .iter()
            .map(|w| w.replace("{socket}", &socket.display().to_string()))
            .collect();
        let mut env: Vec<(String, Option<std::ffi::OsString>)> =
            self.env.into_iter().map(|(k, v)| (k, Some(v))).collect();
        env.extend(self.unset.into_iter().map(|k| (k, None)));
        let mut d = Daemon {
            child: None,
            telemetry: dir.path().join("telemetry.jsonl"),
            log: dir.path().join("askbusd.log"),
            socket,
            config,
            dir,
            args,
            env,
            wrapper,
            ready_line: self
                .ready_line
                .unwrap_or_else(|| "askbusd ready on".to_owned()),
            journal: self.journal,
            nofile: self.nofile,
        };
        d.spawn();
        d
    }
}

impl Daemon {
    /// Starts askbusd with the default flags (plus socket and telemetry in the temp dir).
    pub fn start() -> Daemon {
        Daemon::start_with(&[])
    }

    /// Starts askbusd with extra flags.
    pub fn start_with(args: &[&str]) -> Daemon {
        Daemon::builder().args(args).start()
    }

    /// Starts askbusd with extra flags and at most `nofile` open file descriptors.
    pub fn start_limited(args: &[&str], nofile: Option<u64>) -> Daemon {
        let mut b = Daemon::builder().args(args);
        b.nofile = nofile;
        b.start()
    }

    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Rewrites the config file (then `reload` applies it).
    pub fn write_config(&self, text: &str) {
        std::fs::write(&self.config, text).expect("write config");
    }

    /// SIGHUP, then waits until the daemon logged that it reloaded (or failed to).
    pub fn reload(&self) {
        self.reload_pid(self.pid());
    }

    /// `reload`, signalling `pid` (askbusd under a wrapper that does not exec it).
    pub fn reload_pid(&self, pid: u32) {
        let before = self.reload_lines();
        // SAFETY: kill with a pid of ours and a valid signal number.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGHUP) }, 0);
        let deadline = Instant::now() + RECV_TIMEOUT;
        while self.reload_lines() == before {
            assert!(
                Instant::now() < deadline,
                "askbusd never reloaded:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn reload_lines(&self) -> usize {
        let log = self.log_text();
        log.matches("configuration reloaded").count() + log.matches("reload failed").count()
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let mut cmd = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(daemon_bin());
                cmd
            }
            None => {
                let mut cmd = Command::new(daemon_bin());
                cmd.arg("--socket").arg(&self.socket);
                cmd
            }
        };
        cmd.args(&self.args)
            .env("ASKBUS_LOG", "debug")
            // The policy rules would decide some approvals before a UI sees them; the tests
            // of the policy turn them on (tests/e2e/policy_daemon.rs), the others test the bus.
            .env("ASKBUS_POLICIES", "off")
            // No config file but the test's own: a developer's ~/.config must not leak in.
            .env("XDG_CONFIG_HOME", self.dir.path())
            .env_remove("ASKBUS_CONFIG")
            .env_remove("CONFIGURATION_DIRECTORY")
            .env_remove("STATE_DIRECTORY")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("JOURNAL_STREAM");
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        if !self
            .args
            .iter()
            .any(|a| a == "--no-telemetry" || a == "--telemetry")
        {
            cmd.arg("--telemetry").arg(&self.telemetry);
        }
        // Memory only unless the test asks for a store: protocol v1 exactly, and no test
        // touches a store of the user running it.
        if !self
            .args
            .iter()
            .any(|a| a == "--no-store" || a == "--store" || a.starts_with("--store="))
        {
            cmd.arg("--no-store");
        }
        if self.journal {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(&self.log).expect("log file");
            cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
        }
        if let Some(n) = self.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child here.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let ready_lines = self.ready_lines();
        self.child = Some(cmd.spawn().expect("spawn askbusd"));
        self.wait_ready(ready_lines);
    }

    /// Waits for the daemon's ready line (the socket is bound and listening by then). No
    /// probe connection: it would hold a connection slot and show up in the counters.
    fn wait_ready(&mut self, ready_lines_before: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.ready_lines() > ready_lines_before {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("askbusd exited early ({status}):\n{}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "askbusd never became ready:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn ready_lines(&self) -> usize {
        self.log_text().matches(self.ready_line.as_str()).count()
    }

    /// The daemon's pid (the wrapper's, which execs askbusd, when there is one).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The pid of the wrapper's child, for a wrapper that does not exec askbusd (strace).
    pub fn child_pid(&self) -> u32 {
        let pid = self.pid();
        let deadline = Instant::now() + RECV_TIMEOUT;
        loop {
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            if let Some(child) = children.split_whitespace().next() {
                return child.parse().expect("a pid");
            }
            assert!(Instant::now() < deadline, "the wrapper has no child");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits (at most `within`) for the process to exit by itself.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                self.child = None;
                return status;
            }
            assert!(started.elapsed() < within, "did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends a signal to the daemon.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill with a pid we spawned and a valid signal number.
        let rc = unsafe { libc::kill(self.pid() as i32, sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// SIGTERM, then waits for exit (at most `within`); returns the status and how long it took.
    pub fn terminate(&mut self, within: Duration) -> (ExitStatus, Duration) {
        let started = Instant::now();
        self.signal(libc::SIGTERM);
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                self.child = None;
                return (status, started.elapsed());
            }
            if started.elapsed() > within {
                let _ = child.kill();
                panic!("askbusd did not exit within {within:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the daemon again with the same flags, socket and files (after `kill`/`terminate`).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the daemon first");
        self.spawn();
    }

    /// Whether the daemon process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Every telemetry record written so far.
    pub fn telemetry_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.telemetry).unwrap_or_default();
        text.lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad telemetry line {l:?}: {e}"))
            })
            .collect()
    }

    /// Waits until the telemetry file holds at least `n` records (it is written off the
    /// broker's path, so it may lag the frames a little).
    pub fn wait_telemetry(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + RECV_TIMEOUT;
        loop {
            let records = self.telemetry_records();
            if records.len() >= n || Instant::now() > deadline {
                return records;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub async fn connect(&self) -> Raw {
        Raw::connect(&self.socket).await
    }

    /// A connection that has subscribed and received `subscribed` (with the pending count).
    pub async fn ui(&self) -> (Raw, u64) {
        let mut ui = self.connect().await;
        ui.send(json!({"type": "subscribe", "client": "test-ui/1"}))
            .await;
        let sub = ui.recv().await;
        assert_eq!(sub["type"], "subscribed", "{sub}");
        (ui, sub["pending"].as_u64().expect("pending count"))
    }

    /// Runs the `askbus` CLI against this daemon, with the daemon's config home (so a rule
    /// "allow always" writes lands in the test's directory, never in the user's own).
    pub fn cli(&self) -> Command {
        let mut cmd = Command::new(cli_bin());
        cmd.env("ASKBUS_SOCKET", &self.socket);
        cmd.env("XDG_CONFIG_HOME", self.dir.path());
        cmd
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A raw-frame client: writes length-prefixed JSON, reads frames with a timeout.
pub struct Raw {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Raw {
    pub async fn connect(path: &Path) -> Raw {
        Raw::try_connect(path)
            .await
            .unwrap_or_else(|e| panic!("connect {}: {e}", path.display()))
    }

    /// `connect` that reports a refused connection (a daemon being restarted) instead of
    /// failing the test.
    pub async fn try_connect(path: &Path) -> std::io::Result<Raw> {
        Ok(Raw {
            stream: UnixStream::connect(path).await?,
            buf: Vec::new(),
        })
    }

    /// Shuts the write side (shutdown(2) `SHUT_WR`), as `nc -N` does after its input: the
    /// daemon reads end of input, and this side can still read.
    pub async fn shutdown_write(&mut self) {
        use tokio::io::AsyncWriteExt;
        self.stream.shutdown().await.expect("shutdown(SHUT_WR)");
    }

    /// Sends one frame holding `value`.
    pub async fn send(&mut self, value: Value) {
        self.send_payload(value.to_string().as_bytes()).await;
    }

    /// Sends `payload` behind a correct length prefix.
    pub async fn send_payload(&mut self, payload: &[u8]) {
        let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(payload);
        self.send_raw(&frame).await;
    }

    /// Writes bytes as they are (no prefix added). A daemon that already closed the
    /// connection is not an error here: what it said before closing is still readable.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        if let Err(e) = self.stream.write_all(bytes).await {
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ),
                "write: {e}"
            );
        }
    }

    /// Writes bytes, tolerating a daemon that already closed the connection.
    pub async fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// The next frame, or `None` if the daemon closed the connection or nothing came within
    /// `wait`.
    pub async fn recv_within(&mut self, wait: Duration) -> Option<Value> {
        tokio::time::timeout(wait, self.read_frame())
            .await
            .unwrap_or_default()
    }

    /// The next frame; fails the test after `RECV_TIMEOUT` or if the connection closed.
    pub async fn recv(&mut self) -> Value {
        match tokio::time::timeout(RECV_TIMEOUT, self.read_frame()).await {
            Ok(Some(v)) => v,
            Ok(None) => panic!("connection closed while a frame was expected"),
            Err(_) => panic!("no frame within {RECV_TIMEOUT:?}"),
        }
    }

    /// The next frame, which must be of type `ty`.
    pub async fn recv_type(&mut self, ty: &str) -> Value {
        let v = self.recv().await;
        assert_eq!(v["type"], ty, "expected a {ty} frame, got {v}");
        v
    }

    /// The next frame, which must be an error with `code`.
    pub async fn recv_error(&mut self, code: &str) -> Value {
        let v = self.recv_type("error").await;
        assert_eq!(v["code"], code, "{v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        v
    }

    /// Asserts nothing arrives for `wait`.
    pub async fn expect_silence(&mut self, wait: Duration) {
        if let Ok(frame) = tokio::time::timeout(wait, self.read_frame()).await {
            panic!("expected silence, got {frame:?}");
        }
    }

    /// Asserts the daemon closes the connection (EOF) within `RECV_TIMEOUT`, after any frames.
    pub async fn expect_closed(&mut self) {
        let deadline = tokio::time::Instant::now() + RECV_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.read_frame()).await {
                Ok(None) => return,
                Ok(Some(_)) => continue,
                Err(_) => panic!("connection still open after {RECV_TIMEOUT:?}"),
            }
        }
    }

    /// Round trip that proves the connection still works and everything before it arrived.
    pub async fn ping(&mut self) {
        self.send(json!({"type": "ping", "id": "sync"})).await;
        let pong = self.recv_type("pong").await;
        assert_eq!(pong["id"], "sync");
    }

    /// Reads one frame; `None` on EOF or a read error.
    async fn read_frame(&mut self) -> Option<Value> {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let payload: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
                    return Some(serde_json::from_slice(&payload).unwrap_or_else(|e| {
                        panic!(
                            "daemon sent invalid JSON ({e}): {:?}",
                            String::from_utf8_lossy(&payload)
                        )
                    }));
                }
            }
            self.buf.reserve(64 * 1024);
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

/// A one-question choice request.
pub fn choice_request(id: &str) -> Value {
    json!({
        "type": "ask-user-request",
        "correlationId": id,
        "questions": [{
            "question": "Which database?",
            "header": "Database",
            "type": "choice",
            "options": [
                {"label": "SQLite", "description": "A file"},
                {"label": "PostgreSQL", "description": "A server"}
            ]
        }]
    })
}

/// `choice_request` with extra top-level fields merged in.
pub fn request_with(id: &str, extra: Value) -> Value {
    let mut req = choice_request(id);
    for (k, v) in extra.as_object().expect("object") {
        req[k] = v.clone();
    }
    req
}

pub fn answer(id: &str, answers: Value) -> Value {
    json!({"type": "ask-user-response", "correlationId": id, "answers": answers})
}

/// Spawns `cmd` with piped stdout/stderr and `input` written to its stdin (then closed).
pub fn spawn_with_stdin(cmd: &mut Command, input: &str) -> Child {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child
}

/// A current-thread runtime for tests that mix blocking process control with async I/O.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `GET target` over HTTP/1.1 on a connected stream; the status code and the body.
pub fn http_get(mut stream: impl std::io::Read + std::io::Write, target: &str) -> (u16, String) {
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: askbusd\r\nConnection: close\r\n\r\n"
    )
    .expect("send request");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("read reply");
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end: {reply:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head:?}"));
    (status, body.to_owned())
}

/// `/metrics` from a Unix socket.
pub fn scrape_unix(path: &Path) -> String {
    let stream = std::os::unix::net::UnixStream::connect(path)
        .unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
    let (status, body) = http_get(stream, "/metrics");
    assert_eq!(status, 200, "{body}");
    body
}

/// Samples of a text exposition: `name{labels}` (as written) to value.
pub fn parse_metrics(text: &str) -> std::collections::BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad sample {l:?}"));
            let value = value
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {l:?}"));
            (name.to_owned(), value)
        })
        .collect()
}
