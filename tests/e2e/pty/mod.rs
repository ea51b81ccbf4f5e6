//! A pseudo-terminal driver for the UI tests: runs a program in a pty (80×24 unless sized), emulates the
//! screen with vt100 so tests read what a person would see, and types keys as a terminal
//! sends them. The daemon and raw frames come from the shared harness in `harness`.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};

/// How long a test waits for the screen to show something.
pub const WAIT: Duration = Duration::from_secs(10);

/// How long output must pause before the screen counts as drawn.
const SETTLE: Duration = Duration::from_millis(40);

pub const ENTER: &str = "\r";
pub const ESC: &str = "\x1b";
pub const DOWN: &str = "\x1b[B";
pub const UP: &str = "\x1b[A";
pub const RIGHT: &str = "\x1b[C";
pub const LEFT: &str = "\x1b[D";
pub const TAB: &str = "\t";
pub const BACKTAB: &str = "\x1b[Z";
pub const CTRL_L: &str = "\x0c";
pub const HOME: &str = "\x1b[H";
pub const END: &str = "\x1b[F";
pub const PGUP: &str = "\x1b[5~";
pub const PGDN: &str = "\x1b[6~";

/// Marks a command whose `XDG_CONFIG_HOME` the test chose (removed before it runs).
const GIVEN_CONFIG: &str = "ASKBUS_TEST_GIVEN_CONFIG_HOME";

pub struct Pty {
    /// The emulated screen, and when output last arrived.
    screen: Arc<Mutex<(vt100::Parser, Instant)>>,
    /// Every byte the program wrote to the terminal, for tests that check what never
    /// reaches it (escape sequences from bus data).
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
    /// The program's `XDG_CONFIG_HOME` when the test gave none: a rule "allow always" writes
    /// lands here, never in the config of the user running the tests.
    _config_home: Option<tempfile::TempDir>,
}

impl Pty {
    /// The `askbus` CLI with `args`.
    pub fn askbus(args: &[&str]) -> Pty {
        Pty::askbus_sized(args, 24, 80)
    }

    /// The `askbus` CLI with `args` in a terminal of `rows`×`cols`.
    pub fn askbus_sized(args: &[&str], rows: u16, cols: u16) -> Pty {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_askbus"));
        cmd.args(args);
        Pty::spawn_sized(cmd, rows, cols)
    }

    /// The `askbus` CLI with `args`, `rows`×`cols`, and `config_home` as its
    /// `XDG_CONFIG_HOME` (where "allow always" writes its rule; a daemon started with the
    /// same one reads it).
    pub fn askbus_config(args: &[&str], rows: u16, cols: u16, config_home: &Path) -> Pty {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_askbus"));
        cmd.args(args);
        cmd.env("XDG_CONFIG_HOME", config_home);
        cmd.env(GIVEN_CONFIG, "1");
        Pty::spawn_sized(cmd, rows, cols)
    }

    /// A shell command line (for pipelines).
    pub fn shell(line: &str) -> Pty {
        let mut cmd = CommandBuilder::new("/bin/sh");
        cmd.args(["-c", line]);
        Pty::spawn(cmd)
    }

    fn spawn(cmd: CommandBuilder) -> Pty {
        Pty::spawn_sized(cmd, 24, 80)
    }

    fn spawn_sized(mut cmd: CommandBuilder, rows: u16, cols: u16) -> Pty {
        cmd.env("TERM", "xterm-256color");
        // The test's own config home (askbus_config), else a fresh one, whatever the
        // environment of the user running the tests says.
        let config_home = if cmd.get_env(GIVEN_CONFIG).is_some() {
            cmd.env_remove(GIVEN_CONFIG);
            None
        } else {
            let dir = tempfile::tempdir().expect("a config home for the program");
            cmd.env("XDG_CONFIG_HOME", dir.path());
            Some(dir)
        };
        cmd.env_remove("ASKBUS_SOCKET");
        cmd.cwd(std::env::temp_dir());
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let child = pair.slave.spawn_command(cmd).expect("spawn in the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let screen = Arc::new(Mutex::new((
            vt100::Parser::new(rows, cols, 0),
            Instant::now(),
        )));
        let s = screen.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let r = raw.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                r.lock().unwrap().extend_from_slice(&buf[..n]);
                let mut s = s.lock().unwrap();
                s.0.process(&buf[..n]);
                s.1 = Instant::now();
            }
        });
        Pty {
            screen,
            raw,
            writer,
            child,
            _master: pair.master,
            _config_home: config_home,
        }
    }

    /// The pid of the program in the terminal.
    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("a running child has a pid")
    }

    /// Every byte written to the terminal so far.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }

    /// The window title and the count of audible bells, as the terminal saw them.
    pub fn title_and_bells(&self) -> (String, usize) {
        let s = self.screen.lock().unwrap();
        (
            s.0.screen().title().to_owned(),
            s.0.screen().audible_bell_count(),
        )
    }

    /// The screen's text, row by row.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().0.screen().contents()
    }

    /// The screen once output has paused (a frame is drawn in several writes, and a test
    /// must not read one half drawn).
    fn settled_screen(&self) -> Option<String> {
        let s = self.screen.lock().unwrap();
        (s.1.elapsed() >= SETTLE).then(|| s.0.screen().contents())
    }

    /// Waits until the screen shows `text`; returns the screen.
    pub async fn wait_for(&self, text: &str) -> String {
        self.wait_until(&format!("{text:?} on screen"), |s| s.contains(text))
            .await
    }

    /// Waits until the screen no longer shows `text`; returns the screen.
    pub async fn wait_gone(&self, text: &str) -> String {
        self.wait_until(&format!("{text:?} to leave the screen"), |s| {
            !s.contains(text)
        })
        .await
    }

    pub async fn wait_until(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            if let Some(s) = self.settled_screen() {
                if pred(&s) {
                    return s;
                }
            }
            if start.elapsed() > WAIT {
                panic!(
                    "timed out waiting for {what}; the screen:\n{}",
                    self.screen()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How the first cell of `text` on the screen is drawn: its foreground colour, bold and
    /// underline (`None` when the text is not on screen). Colours mean something here (the
    /// root command of a shell command, a diff's added and removed lines).
    pub fn style_of(&self, text: &str) -> Option<(vt100::Color, bool, bool)> {
        let s = self.screen.lock().unwrap();
        let screen = s.0.screen();
        let (rows, cols) = screen.size();
        for row in 0..rows {
            let line: Vec<String> = (0..cols)
                .map(|c| match screen.cell(row, c) {
                    Some(cell) if cell.is_wide_continuation() => String::new(),
                    Some(cell) if cell.has_contents() => cell.contents(),
                    _ => " ".to_owned(),
                })
                .collect();
            // Cells hold one character each (wide ones leave an empty cell after them).
            let joined: String = line.concat();
            if let Some(byte) = joined.find(text) {
                let mut at = 0;
                for (col, cell) in line.iter().enumerate() {
                    if at >= byte {
                        let cell = screen.cell(row, col as u16)?;
                        return Some((cell.fgcolor(), cell.bold(), cell.underline()));
                    }
                    at += cell.len();
                }
            }
        }
        None
    }

    /// Types `keys` as the terminal would send them ("\r" is Enter, "\x1b" Esc, …).
    pub fn keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    pub async fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > WAIT {
                panic!("the program did not exit; the screen:\n{}", self.screen());
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
