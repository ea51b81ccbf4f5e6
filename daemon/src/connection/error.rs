//! Why a connection is refused or closed by the daemon itself (not by the broker): the
//! accept-time refusals and the framing faults that leave a stream past recovery, each with
//! its wire code and wording in one place, as `BrokerError` has the broker's.

use crate::protocol::{ErrorCode, FrameError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// The access rules give this uid no right at all.
    #[error("uid {uid} may not connect to this askbusd")]
    Forbidden { uid: u32 },
    #[error("the daemon already serves {limit} connections")]
    TooManyConnections { limit: usize },
    #[error("uid {uid} already has {limit} connections")]
    TooManyForUid { uid: u32, limit: usize },
    /// Accepted with the descriptor kept spare for this, so a queued client is told at once.
    #[error("askbusd is out of file descriptors; try again shortly")]
    OutOfDescriptors,
    #[error("frame length exceeds the limit of {limit} bytes; closing the connection")]
    FrameTooLarge { limit: usize },
    #[error("frame not completed within {ms} ms; closing the connection")]
    FrameTimeout { ms: u128 },
}

impl ConnError {
    pub fn code(&self) -> ErrorCode {
        match self {
            ConnError::Forbidden { .. } => ErrorCode::Forbidden,
            ConnError::TooManyConnections { .. }
            | ConnError::TooManyForUid { .. }
            | ConnError::OutOfDescriptors => ErrorCode::TooManyConnections,
            ConnError::FrameTooLarge { .. } => ErrorCode::FrameTooLarge,
            ConnError::FrameTimeout { .. } => ErrorCode::FrameTimeout,
        }
    }

    /// What the daemon's log says, without the peer's numbers (the log line has them).
    pub fn summary(&self) -> &'static str {
        match self {
            ConnError::Forbidden { .. } => "uid not allowed",
            ConnError::TooManyConnections { .. } => "too many connections",
            ConnError::TooManyForUid { .. } => "too many connections for this uid",
            ConnError::OutOfDescriptors => "out of file descriptors",
            ConnError::FrameTooLarge { .. } => "frame too large",
            ConnError::FrameTimeout { .. } => "frame not completed in time",
        }
    }

    pub fn to_frame_error(&self) -> FrameError {
        FrameError::new(self.code(), self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_wording() {
        let cases = [
            (
                ConnError::Forbidden { uid: 7 },
                ErrorCode::Forbidden,
                "uid 7 may not connect to this askbusd",
            ),
            (
                ConnError::TooManyConnections { limit: 3 },
                ErrorCode::TooManyConnections,
                "the daemon already serves 3 connections",
            ),
            (
                ConnError::TooManyForUid { uid: 7, limit: 2 },
                ErrorCode::TooManyConnections,
                "uid 7 already has 2 connections",
            ),
            (
                ConnError::OutOfDescriptors,
                ErrorCode::TooManyConnections,
                "askbusd is out of file descriptors; try again shortly",
            ),
            (
                ConnError::FrameTooLarge { limit: 1024 },
                ErrorCode::FrameTooLarge,
                "frame length exceeds the limit of 1024 bytes; closing the connection",
            ),
            (
                ConnError::FrameTimeout { ms: 250 },
                ErrorCode::FrameTimeout,
                "frame not completed within 250 ms; closing the connection",
            ),
        ];
        for (err, code, message) in cases {
            let frame = err.to_frame_error();
            assert_eq!((frame.code, frame.message.as_str()), (code, message));
            assert!(frame.correlation_id.is_none());
        }
    }
}
