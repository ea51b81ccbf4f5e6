//! What the `askbus chat` suites share: the chat process (its stderr kept in `chat.log` beside
//! the daemon, killed when dropped), the producer and its requests, a daemon with the policy
//! rules on (for "Allow always"), and a stand-in's state with the event the tests wait on
//! (every change of it ticks; a wait is on that, never on a sleep).

use crate::harness as common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Daemon, Raw};
use serde_json::{json, Value};
use tokio::sync::watch;

/// How long a wait on a stand-in may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// A stand-in: its state `S`, the tick of its changes, and where it is served (each suite
/// adds its own methods for its own `S`).
pub struct Shared<S> {
    pub st: Arc<Mutex<S>>,
    tick: Arc<watch::Sender<u64>>,
    pub base: String,
}

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Shared {
            st: self.st.clone(),
            tick: self.tick.clone(),
            base: self.base.clone(),
        }
    }
}

impl<S: Default> Shared<S> {
    pub fn new(base: &str) -> Shared<S> {
        Shared {
            st: Arc::default(),
            tick: Arc::new(watch::channel(0).0),
            base: base.to_owned(),
        }
    }
}

impl<S> Shared<S> {
    /// A receiver that sees every change from now on (a stand-in's own long polls).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.tick.subscribe()
    }

    /// Wakes the waits: the state changed.
    pub fn changed(&self) {
        self.tick.send_modify(|t| *t += 1);
    }

    /// Waits until `f` finds what it looks for in the state; on timeout, fails with `what`
    /// and what `describe` says of the state.
    pub async fn until_or<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&S) -> Option<T>,
        describe: impl Fn(&S) -> String,
    ) -> T {
        let mut rx = self.tick.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = f(&self.st.lock().unwrap()) {
                return v;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => panic!(
                    "timed out waiting for {what}; {}",
                    describe(&self.st.lock().unwrap())
                ),
            }
        }
    }
}

/// A running `askbus chat`, killed when dropped.
pub struct Chat {
    child: Child,
}

impl Drop for Chat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Chat {
    /// Starts `cmd` (an `askbus chat …` of `d`'s), its stderr appended to `chat.log`.
    pub fn spawn(d: &Daemon, mut cmd: Command) -> Chat {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(d.dir.path().join("chat.log"))
                    .unwrap(),
            ));
        Chat {
            child: cmd.spawn().expect("askbus chat"),
        }
    }
}

/// What `askbus chat` logged so far.
pub fn chat_log(d: &Daemon) -> String {
    std::fs::read_to_string(d.dir.path().join("chat.log")).unwrap_or_default()
}

/// Waits until `askbus chat` has logged `needle` (the log is a file: polled).
pub async fn logged(d: &Daemon, needle: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !chat_log(d).contains(needle) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never logged {needle:?}: {}",
            chat_log(d)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `askbus chat`'s state file (`chat.json`, its posted messages per request) holds
/// `needle`: what a restart reads back (a file: polled, with a deadline).
pub async fn state_holds(d: &Daemon, needle: &str) {
    let state = d.dir.path().join("chat.json");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(&state)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chat's state never held {needle:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn producer(d: &Daemon) -> Raw {
    let mut p = d.connect().await;
    p.send(json!({"type": "hello", "protocol": 1, "client": "gemini-cli/0.61.0"}))
        .await;
    p.recv_type("welcome").await;
    p
}

pub fn ask(id: &str, questions: Value) -> Value {
    json!({"type": "ask-user-request", "correlationId": id, "questions": questions,
        "context": {"agent": "gemini-cli", "project": "shop"}})
}

/// A hook-style approval (Allow once and Deny only) in project `project`, with the policy
/// rules on: askbus's own "Allow always" is the rule.
pub fn shell_approval(id: &str, command: &str, project: &str) -> Value {
    json!({"type": "tool-confirmation-request", "correlationId": id,
        "toolCall": {"name": "Bash", "args": {"command": command}},
        "outcomes": ["proceed_once", "cancel"], "timeoutMs": 600_000, "noUi": "wait",
        "context": {"agent": "claude-code", "project": project}})
}

/// A daemon with the policy rules on, its admin tier in a directory of its own (kept as long as
/// the daemon), and the user's rule file "Allow always" writes to.
pub fn policy_daemon() -> (Daemon, tempfile::TempDir, PathBuf) {
    let admin = tempfile::tempdir().unwrap();
    let d = Daemon::builder()
        .env("ASKBUS_POLICIES", "on")
        .args(&["--policy-admin-dir", &admin.path().display().to_string()])
        .start();
    let file = d.dir.path().join("askbus/policies/askbus-rules.toml");
    (d, admin, file)
}

/// Expects the producer's next decision to allow `id` once (what a hook's "always" sends).
pub async fn allowed_once(p: &mut Raw, id: &str) {
    let r = p.recv_type("tool-confirmation-response").await;
    assert_eq!(
        (r["correlationId"].clone(), r["outcome"].clone()),
        (json!(id), json!("proceed_once")),
        "{r}"
    );
}

/// Asks `command` in `project` as `id` and expects it allowed once with no UI: a rule decided it.
pub async fn allowed_by_rule(p: &mut Raw, id: &str, command: &str, project: &str) {
    p.send(shell_approval(id, command, project)).await;
    allowed_once(p, id).await;
}
