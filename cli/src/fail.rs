//! How an `askbus` command ends: every exit status the command uses ([`exit`], with the help
//! text that documents `askbus ask`'s), and how a failure is reported: one place that prints
//! the error once (each cause only if it adds something), adds a hint when askbusd cannot be
//! reached, and picks the exit status.

use std::fmt;

use askbus::client::ClientError;

/// Every exit status of the `askbus` command. No other file writes a status as a number.
///
/// `askbus ask`'s are a contract with scripts (its help and the README list them, from
/// [`EXIT_STATUS_HELP`]): 0–6 are how the question ended, 7 and up are failures, so a script
/// never mistakes a crash for a person's answer. Other commands use 0, [`FAILURE`](exit::FAILURE)
/// and [`USAGE`](exit::USAGE), and a few a status of their own, named below. `askbus acp`
/// passes on its agent's status (or 128 + the signal that killed it).
pub mod exit {
    /// Success; for `ask`, answered.
    pub const OK: u8 = 0;
    /// A command failed (the error on stderr), or `askbus doctor` found a check failing.
    pub const FAILURE: u8 = 1;

    /// `ask`: the person dismissed the question.
    pub const DISMISSED: u8 = 1;
    /// `ask`: nobody answered in time.
    pub const TIMEOUT: u8 = 2;
    /// `ask`: no UI was connected (`--no-ui reject`).
    pub const NO_UI: u8 = 3;
    /// `ask`: askbusd refused the questions (invalid, or over a limit).
    pub const REJECTED: u8 = 4;
    /// askbusd cannot be reached (or is not trusted): every command that needs it.
    pub const UNREACHABLE: u8 = 5;
    /// `ask`: withdrawn (Ctrl-C), or askbusd shut down.
    pub const ENDED: u8 = 6;
    /// `ask`: the connection to askbusd broke before the answer came (it crashed or was
    /// killed).
    pub const LOST: u8 = 7;
    /// `ask`: askbusd sent something this client cannot read.
    pub const PROTOCOL: u8 = 8;
    /// `ask`: the questions file cannot be read, or is not JSON.
    pub const BAD_FILE: u8 = 9;

    /// `askbus hook`: the tool call is blocked. Every agent (Gemini CLI, Claude Code, Codex)
    /// reads 2 as "blocked, stderr is the reason"; Gemini CLI runs the tool on any other
    /// non-zero status, so a hook never exits with one.
    pub const HOOK_BLOCK: u8 = 2;
    /// `askbus ui`: standard output is not a terminal.
    pub const NOT_A_TERMINAL: u8 = 2;
    /// `askbus schema NAME`: no schema has that name, or more than one could be meant.
    pub const NO_SUCH_SCHEMA: u8 = 2;

    /// The command line is wrong (sysexits' EX_USAGE; every askbus command uses it).
    pub const USAGE: u8 = 64;
    /// `askbus policy check`: the policy engine refuses the rules (sysexits' EX_DATAERR).
    pub const BAD_RULES: u8 = 65;
    /// Anything else (writing the answer failed, no signal handler, no runtime…).
    pub const INTERNAL: u8 = 70;
}

/// The help text's and the README's table of `askbus ask`'s exit statuses (one source, tested
/// against both).
pub const EXIT_STATUS_HELP: &str = "Exit status: 0 answered, 1 dismissed, 2 timeout, 3 no-ui, \
4 rejected by askbusd (invalid questions or a limit; its message on stderr), 5 askbusd is \
unreachable, 6 withdrawn (Ctrl-C) or askbusd shut down, 7 the connection to askbusd was lost \
before the answer, 8 protocol error (askbusd sent something unreadable), 9 the questions file \
cannot be read or is not JSON, 64 usage error, 70 internal error.";

/// An error that ends the command with its own exit status (one of [`exit`]). It reads as
/// the error it wraps.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn new(code: u8, error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code,
            error: error.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The wrapped error itself comes next in the chain (Display shows only its message).
        Some(self.error.as_ref())
    }
}

/// What to do about an error connecting to the socket at all.
pub fn connect_hint(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind::*;
    match e.kind() {
        PermissionDenied => {
            "This user may not use that socket: check its directory's permissions and askbusd's \
             access rules, or give --socket the path of a daemon you may use."
        }
        NotFound | ConnectionRefused => {
            "Is askbusd running? Start askbusd (or `systemctl --user start askbusd`), or give \
             --socket PATH (or set ASKBUS_SOCKET) if it listens elsewhere."
        }
        _ => "Start askbusd, or give --socket PATH (or set ASKBUS_SOCKET) if it listens elsewhere.",
    }
}

/// The message printed for `e` (each cause once, then a hint if there is one) and the exit
/// status: a [`Failure`]'s, else 5 when askbusd is unreachable, else 1.
pub fn report(e: &anyhow::Error) -> (String, u8) {
    let (mut text, hint, code) = describe(e);
    if let Some(h) = hint {
        text.push_str(".\n");
        text.push_str(h);
    }
    (text, code)
}

/// The parts of [`report`]: the message (each cause once), the hint, the exit status.
pub fn describe(e: &anyhow::Error) -> (String, Option<&'static str>, u8) {
    let mut text = String::new();
    let mut hint = None;
    let mut code = None;
    for cause in e.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            code.get_or_insert(f.code);
            if let Some(ClientError::Connect { source, .. }) = f.error.downcast_ref::<ClientError>()
            {
                hint.get_or_insert(connect_hint(source));
            }
            continue;
        }
        match cause.downcast_ref::<ClientError>() {
            Some(ClientError::Connect { source, .. }) => {
                hint.get_or_insert(connect_hint(source));
                code.get_or_insert(exit::UNREACHABLE);
            }
            Some(ClientError::Untrusted(_)) => {
                code.get_or_insert(exit::UNREACHABLE);
            }
            _ => {}
        }
        let s = cause.to_string();
        // A cause its parent already quoted (`…: No such file or directory (os error 2)`).
        if s.is_empty() || text.contains(&s) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s);
    }
    let text = crate::term::sanitize(&text).into_owned();
    (text, hint, code.unwrap_or(exit::FAILURE))
}

/// Why a reconnecting subscriber's connection went down, in one line (the notifier's and
/// `askbus chat`'s "…; retrying in 2s").
pub fn connection_down(error: askbus::client::ClientError) -> String {
    match error {
        askbus::client::ClientError::Closed => "askbusd closed the connection".to_owned(),
        e => describe(&e.into()).0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_os_error_is_said_once_with_a_hint() {
        let e: anyhow::Error = ClientError::Connect {
            path: "/x/a.sock".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        }
        .into();
        let (text, code) = report(&e);
        assert_eq!(text.matches("os error 2").count(), 1, "{text}");
        assert!(text.contains("/x/a.sock"), "{text}");
        assert!(text.contains("Is askbusd running?"), "{text}");
        assert_eq!(code, 5);
        let wrapped = Failure::new(
            9,
            anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EACCES))
                .context("cannot read q.json"),
        );
        let (text, code) = report(&anyhow::Error::from(wrapped).context("outer"));
        assert_eq!(code, 9);
        assert_eq!(
            text,
            "outer: cannot read q.json: Permission denied (os error 13)"
        );
        let plain = Err::<(), _>(std::io::Error::other("boom"))
            .context("x")
            .unwrap_err();
        assert_eq!(report(&plain), ("x: boom".to_owned(), 1));
    }
}
