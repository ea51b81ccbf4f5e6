//! Wire error codes: the one place where a failure becomes a code a peer can act on.

use std::fmt;

/// Every error code the daemon sends in an `error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    InvalidJson,
    InvalidFrame,
    UnknownType,
    FrameTooLarge,
    InvalidRequest,
    DuplicateCorrelationId,
    TooManyPending,
    NotPending,
    NotSubscribed,
    InvalidResponse,
    UnsupportedProtocol,
    Forbidden,
    TooManyConnections,
    FrameTimeout,
    /// Federation: an answer to a remote question could not reach its origin node.
    OriginUnreachable,
    /// The daemon's store cannot write (disk full, I/O error): a new request is refused for
    /// now. Transient: retry within your own timeout.
    StoreUnavailable,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 16] = [
        ErrorCode::InvalidJson,
        ErrorCode::InvalidFrame,
        ErrorCode::UnknownType,
        ErrorCode::FrameTooLarge,
        ErrorCode::InvalidRequest,
        ErrorCode::DuplicateCorrelationId,
        ErrorCode::TooManyPending,
        ErrorCode::NotPending,
        ErrorCode::NotSubscribed,
        ErrorCode::InvalidResponse,
        ErrorCode::UnsupportedProtocol,
        ErrorCode::Forbidden,
        ErrorCode::TooManyConnections,
        ErrorCode::FrameTimeout,
        ErrorCode::OriginUnreachable,
        ErrorCode::StoreUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid-json",
            ErrorCode::InvalidFrame => "invalid-frame",
            ErrorCode::UnknownType => "unknown-type",
            ErrorCode::FrameTooLarge => "frame-too-large",
            ErrorCode::InvalidRequest => "invalid-request",
            ErrorCode::DuplicateCorrelationId => "duplicate-correlation-id",
            ErrorCode::TooManyPending => "too-many-pending",
            ErrorCode::NotPending => "not-pending",
            ErrorCode::NotSubscribed => "not-subscribed",
            ErrorCode::InvalidResponse => "invalid-response",
            ErrorCode::UnsupportedProtocol => "unsupported-protocol",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TooManyConnections => "too-many-connections",
            ErrorCode::FrameTimeout => "frame-timeout",
            ErrorCode::OriginUnreachable => "origin-unreachable",
            ErrorCode::StoreUnavailable => "store-unavailable",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// After these the daemon closes the connection: the stream can no longer be trusted
    /// (a frame boundary is lost) or the peer may not talk to this daemon at all. `forbidden`
    /// closes only when it refuses the connection on accept; a forbidden action later
    /// (subscribing without the UI right, answering another user's question) leaves it open.
    pub fn closes_connection(self) -> bool {
        matches!(
            self,
            ErrorCode::FrameTooLarge
                | ErrorCode::FrameTimeout
                | ErrorCode::UnsupportedProtocol
                | ErrorCode::Forbidden
                | ErrorCode::TooManyConnections
        )
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        ErrorCode::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code {s:?}")))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kinds of request a producer can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// `ask-user-request`: questions.
    Question,
    /// `tool-confirmation-request`: an approval.
    Approval,
}

/// An error code as a client reads it from an `error` frame: one this crate knows, or one a
/// later daemon added (kept as sent, so it can still be shown and compared).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Code {
    Known(ErrorCode),
    Unknown(String),
}

impl Code {
    pub fn as_str(&self) -> &str {
        match self {
            Code::Known(c) => c.as_str(),
            Code::Unknown(s) => s,
        }
    }

    /// The code, if this crate knows it.
    pub fn known(&self) -> Option<ErrorCode> {
        match self {
            Code::Known(c) => Some(*c),
            Code::Unknown(_) => None,
        }
    }
}

impl From<ErrorCode> for Code {
    fn from(c: ErrorCode) -> Code {
        Code::Known(c)
    }
}

impl From<&str> for Code {
    fn from(s: &str) -> Code {
        ErrorCode::parse(s).map_or_else(|| Code::Unknown(s.to_owned()), Code::Known)
    }
}

impl PartialEq<ErrorCode> for Code {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == Code::Known(*other)
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Code {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Code::from(&*s))
    }
}

/// A frame the daemon refuses, with what the peer is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct FrameError {
    pub code: ErrorCode,
    pub message: String,
    /// The offending frame's correlationId, when it had a usable one.
    pub correlation_id: Option<String>,
}

impl FrameError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        FrameError {
            code,
            message: message.into(),
            correlation_id: None,
        }
    }

    pub fn with_id(mut self, correlation_id: Option<&str>) -> Self {
        self.correlation_id = correlation_id.map(str::to_owned);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_known_or_kept_as_sent() {
        for code in ErrorCode::ALL {
            let read: Code = serde_json::from_value(serde_json::json!(code.as_str())).unwrap();
            assert_eq!(read, code);
            assert_eq!(read.known(), Some(code));
            let back: ErrorCode = serde_json::from_value(serde_json::json!(code.as_str())).unwrap();
            assert_eq!(back, code);
        }
        let later: Code = serde_json::from_str("\"rate-limited\"").unwrap();
        assert_eq!(later, Code::Unknown("rate-limited".into()));
        assert_eq!(later.known(), None);
        assert_eq!(serde_json::to_string(&later).unwrap(), "\"rate-limited\"");
        assert!(serde_json::from_str::<ErrorCode>("\"rate-limited\"").is_err());
    }
}
