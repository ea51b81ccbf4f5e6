//! What the UI tests need: a real askbusd on a temporary socket, a raw-frame client, and the
//! real `askbus` binary in a pseudo-terminal whose screen is emulated (vt100) so tests read
//! what a person would see.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::{json, Value};

pub const WAIT: Duration = Duration::from_secs(10);

/// A daemon on `dir/askbus.sock`, stopped (SIGTERM) on drop.
pub struct Daemon {
    child: Option<Child>,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start(dir: &Path) -> Daemon {
        Daemon::start_on(&dir.join("askbus.sock"))
    }

    pub fn start_on(socket: &Path) -> Daemon {
        let socket = socket.to_owned();
        let mut child = Command::new(env!("CARGO_BIN_EXE_askbusd"))
            .arg("--socket")
            .arg(&socket)
            .arg("--no-telemetry")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn askbusd");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("askbusd ready on") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
        rx.recv_timeout(WAIT).expect("askbusd did not become ready");
        Daemon {
            child: Some(child),
            socket,
        }
    }

    pub fn stop(&mut self) {
        self.signal(libc::SIGTERM);
    }

    /// Kills it without letting it clean up, as a crash would.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
    }

    fn signal(&mut self, sig: i32) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
            unsafe { libc::kill(child.id() as i32, sig) };
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A raw-frame connection: JSON objects behind a 4-byte big-endian length.
pub struct Raw {
    stream: UnixStream,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).expect("connect to askbusd");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Raw { stream }
    }

    /// A producer that announced itself as `client`.
    pub fn producer(socket: &Path, client: &str) -> Raw {
        let mut raw = Raw::connect(socket);
        raw.send(&json!({"type": "hello", "protocol": 1, "client": client}));
        assert_eq!(raw.recv()["type"], "welcome");
        raw
    }

    pub fn send(&mut self, frame: &Value) {
        let payload = serde_json::to_vec(frame).unwrap();
        self.stream
            .write_all(&(payload.len() as u32).to_be_bytes())
            .unwrap();
        self.stream.write_all(&payload).unwrap();
    }

    pub fn recv(&mut self) -> Value {
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .expect("a frame from askbusd");
        let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut payload).unwrap();
        serde_json::from_slice(&payload).unwrap()
    }

    /// The next frame of type `ty`, skipping others.
    pub fn recv_type(&mut self, ty: &str) -> Value {
        loop {
            let f = self.recv();
            if f["type"] == ty {
                return f;
            }
        }
    }

    pub fn ask(&mut self, id: &str, questions: Value) {
        self.send(
            &json!({"type": "ask-user-request", "correlationId": id, "questions": questions}),
        );
    }
}

/// `askbus` (with `args`) running in an 80×24 pseudo-terminal.
pub struct Pty {
    screen: Arc<Mutex<vt100::Parser>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    pub fn askbus(args: &[&str]) -> Pty {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_askbus"));
        cmd.args(args);
        Pty::spawn(cmd)
    }

    /// A shell command line in the terminal (for pipelines).
    pub fn shell(line: &str) -> Pty {
        let mut cmd = CommandBuilder::new("/bin/sh");
        cmd.args(["-c", line]);
        Pty::spawn(cmd)
    }

    fn spawn(mut cmd: CommandBuilder) -> Pty {
        cmd.env("TERM", "xterm-256color");
        cmd.cwd(std::env::temp_dir());
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let child = pair.slave.spawn_command(cmd).expect("spawn in the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(24, 80, 0)));
        let s = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().process(&buf[..n]);
            }
        });
        Pty {
            screen,
            writer,
            child,
            _master: pair.master,
        }
    }

    /// The screen's text, row by row.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Waits until the screen shows `text`, and returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_until(&format!("{text:?} on screen"), |s| s.contains(text))
    }

    pub fn wait_until(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if start.elapsed() > WAIT {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `keys` (raw bytes as a terminal sends them: "\r" is Enter, "\x1b" Esc, …).
    pub fn keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types `keys` one key at a time, so each is read as its own key press.
    pub fn type_slowly(&mut self, keys: &[&str]) {
        for k in keys {
            self.keys(k);
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    pub fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > WAIT {
                panic!("askbus did not exit; the screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const ENTER: &str = "\r";
pub const ESC: &str = "\x1b";
pub const DOWN: &str = "\x1b[B";
pub const UP: &str = "\x1b[A";
pub const RIGHT: &str = "\x1b[C";
pub const LEFT: &str = "\x1b[D";
pub const TAB: &str = "\t";
pub const BACKTAB: &str = "\x1b[Z";
pub const CTRL_L: &str = "\x0c";
