//! How an `askbus` command reports a failure: one place that prints the error once (each
//! cause only if it adds something), adds a hint when askbusd cannot be reached, and picks the
//! exit status.

use std::fmt;

use askbus::client::ClientError;

/// An error that ends the command with its own exit status (see `ask::exit`). It reads as
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
                code.get_or_insert(crate::ask::exit::UNREACHABLE);
            }
            Some(ClientError::Untrusted(_)) => {
                code.get_or_insert(crate::ask::exit::UNREACHABLE);
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
    (text, hint, code.unwrap_or(1))
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
