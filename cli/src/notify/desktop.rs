//! The desktop sink: freedesktop notifications (`org.freedesktop.Notifications`, Desktop
//! Notifications Specification 1.2) over the session D-Bus, with zbus. Owns the D-Bus side
//! only: showing, replacing and closing notifications, and forwarding the server's
//! `ActionInvoked` / `NotificationClosed` signals to the notifier's loop.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use zbus::zvariant::Value;

/// How long one D-Bus call may take before the server counts as stuck (a hung notification
/// daemon must not stall the notifier, which also answers for the person).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[zbus::proxy(
    interface = "org.freedesktop.Notifications",
    default_service = "org.freedesktop.Notifications",
    default_path = "/org/freedesktop/Notifications"
)]
trait Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        app_name: &str,
        replaces_id: u32,
        app_icon: &str,
        summary: &str,
        body: &str,
        actions: &[&str],
        hints: HashMap<&str, Value<'_>>,
        expire_timeout: i32,
    ) -> zbus::Result<u32>;

    fn close_notification(&self, id: u32) -> zbus::Result<()>;

    fn get_capabilities(&self) -> zbus::Result<Vec<String>>;

    #[zbus(signal)]
    fn action_invoked(&self, id: u32, action_key: String) -> zbus::Result<()>;

    #[zbus(signal)]
    fn notification_closed(&self, id: u32, reason: u32) -> zbus::Result<()>;
}

/// What the notification server tells the notifier.
#[derive(Debug)]
pub enum Signal {
    /// The person clicked the action `key` of notification `id`.
    Action { id: u32, key: String },
    /// Notification `id` is gone (expired, dismissed, closed by us).
    Closed { id: u32 },
}

#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    #[error("the session D-Bus: {0}")]
    Bus(#[from] zbus::Error),
    #[error("the notification server did not answer within {0:?}")]
    Timeout(Duration),
}

/// How urgent a notification is (the spec's `urgency` hint).
#[derive(Debug, Clone, Copy)]
pub enum Urgency {
    Low = 0,
    Normal = 1,
    Critical = 2,
}

/// One notification to show.
pub struct Note<'a> {
    pub replaces: u32,
    pub summary: &'a str,
    pub body: &'a str,
    /// (key, label) pairs; "default" is the click on the notification itself.
    pub actions: &'a [(String, String)],
    pub urgency: Urgency,
    /// Milliseconds; -1 = the server's default, 0 = until closed.
    pub expire_ms: i32,
}

pub struct Desktop {
    proxy: NotificationsProxy<'static>,
    /// Whether the server shows action buttons (capability "actions").
    pub actions: bool,
    /// Whether the server reads markup in bodies (capability "body-markup"): text is then
    /// escaped, so a question cannot format (or link) itself.
    markup: bool,
}

impl Desktop {
    /// Connects to the session bus ($DBUS_SESSION_BUS_ADDRESS) and starts forwarding the
    /// server's signals to `signals`.
    pub async fn connect(signals: mpsc::UnboundedSender<Signal>) -> Result<Desktop, DesktopError> {
        let conn = timed(zbus::Connection::session()).await?;
        let proxy = timed(NotificationsProxy::new(&conn)).await?;
        let mut invoked = timed(proxy.receive_action_invoked()).await?;
        let mut closed = timed(proxy.receive_notification_closed()).await?;
        let caps = timed(proxy.get_capabilities()).await?;
        tokio::spawn(async move {
            loop {
                let signal = tokio::select! {
                    s = invoked.next() => match s.and_then(|s| s.args().ok().map(|a| (a.id, a.action_key))) {
                        Some((id, key)) => Signal::Action { id, key },
                        None => return,
                    },
                    s = closed.next() => match s.and_then(|s| s.args().ok().map(|a| a.id)) {
                        Some(id) => Signal::Closed { id },
                        None => return,
                    },
                };
                if signals.send(signal).is_err() {
                    return;
                }
            }
        });
        Ok(Desktop {
            proxy,
            actions: caps.iter().any(|c| c == "actions"),
            markup: caps.iter().any(|c| c == "body-markup"),
        })
    }

    /// Shows (or replaces) a notification; its id.
    pub async fn show(&self, note: &Note<'_>) -> Result<u32, DesktopError> {
        let summary = crate::term::sanitize(note.summary);
        let body = crate::term::sanitize_lines(note.body);
        let body = if self.markup {
            escape_markup(&body)
        } else {
            body.into_owned()
        };
        // Button labels are bus text too (an option's label): neutralized like the summary.
        let labels: Vec<std::borrow::Cow<str>> = note
            .actions
            .iter()
            .map(|(_, label)| crate::term::sanitize(label))
            .collect();
        let mut flat: Vec<&str> = Vec::new();
        if self.actions {
            for ((key, _), label) in note.actions.iter().zip(&labels) {
                flat.push(key);
                flat.push(label);
            }
        }
        let mut hints = HashMap::new();
        hints.insert("urgency", Value::U8(note.urgency as u8));
        hints.insert("category", Value::Str("im.received".into()));
        hints.insert("desktop-entry", Value::Str("askbus".into()));
        timed(self.proxy.notify(
            "askbus",
            note.replaces,
            "dialog-question",
            &summary,
            &body,
            &flat,
            hints,
            note.expire_ms,
        ))
        .await
    }

    pub async fn close(&self, id: u32) -> Result<(), DesktopError> {
        timed(self.proxy.close_notification(id)).await
    }
}

async fn timed<T>(
    f: impl std::future::Future<Output = zbus::Result<T>>,
) -> Result<T, DesktopError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(DesktopError::Timeout(CALL_TIMEOUT)),
    }
}

/// The spec's body markup is a small HTML subset: escaping `&`, `<`, `>` shows text as text.
fn escape_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            super::escape_markup("<a href=\"x\">&</a>"),
            "&lt;a href=\"x\"&gt;&amp;&lt;/a&gt;"
        );
    }
}
