//! An observer of the bus: [`Watcher`] is told of every request's arrival and end, never
//! their text or answers.

use std::path::Path;

use super::{ClientError, Connection};
use crate::protocol::{BusEvent, ClientFrame, ServerFrame};

/// An observer of the bus (`watch`): told of every request's arrival and end (who, how long,
/// question types and headers; never question text or answers). It cannot answer.
pub struct Watcher {
    conn: Connection,
}

impl Watcher {
    pub async fn connect(path: &Path, client: Option<&str>) -> Result<Watcher, ClientError> {
        let mut conn = Connection::connect(path).await?;
        conn.send(&ClientFrame::Watch { client }).await?;
        loop {
            match conn.recv().await? {
                Some(ServerFrame::Watching {}) => return Ok(Watcher { conn }),
                Some(ServerFrame::Error(e)) => return Err(ClientError::Rejected(e)),
                Some(_) => continue,
                None => return Err(ClientError::Closed),
            }
        }
    }

    /// The next event, or `None` when the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Option<BusEvent>, ClientError> {
        loop {
            match self.conn.recv().await? {
                Some(ServerFrame::BusEvent(e)) => return Ok(Some(e)),
                Some(ServerFrame::Error(e)) => return Err(ClientError::Rejected(e)),
                Some(_) => continue,
                None => return Ok(None),
            }
        }
    }
}
