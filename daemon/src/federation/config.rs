//! Federation settings, resolved: the NATS servers and credentials, this node's name, the
//! subject prefix, and which questions are shared and shown. Turned into async-nats connect
//! options here, so `--check-config` reads the credential and TLS files as a start would
//! (with the `federation` cargo feature; without it, [`check_server`] refuses every server).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::broker::FedPolicy;

/// Default subject prefix and bucket-name stem.
pub const DEFAULT_PREFIX: &str = "askbus";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareUsers {
    /// The daemon's own uid (the default).
    Own,
    Uids(BTreeSet<u32>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FederationConfig {
    pub servers: Vec<String>,
    pub node: String,
    pub prefix: String,
    pub creds_file: Option<PathBuf>,
    pub nkey_seed_file: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub share: bool,
    pub share_users: ShareUsers,
    pub accept: bool,
    pub accept_nodes: BTreeSet<String>,
    pub heartbeat: Duration,
    pub node_timeout: Duration,
    pub answer_timeout: Duration,
    /// The daemon's `max_frame_bytes`: a remote question's entry may be no larger.
    pub max_frame_bytes: usize,
    /// `[federation] require_tls`: the transport warnings are errors.
    pub require_tls: bool,
    /// The daemon's own uid: what it shares by default, and whose UIs see remote questions.
    pub own_uid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    #[error("federation: cannot read {what} {path}: {source}")]
    File {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("federation: {0}")]
    Invalid(String),
}

/// Whether `name` may be a node name (a NATS subject token and a KV key part).
pub fn valid_node(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `prefix` may be a subject prefix (it also names the buckets).
pub fn valid_prefix(prefix: &str) -> bool {
    (1..=32).contains(&prefix.len())
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks a NATS server URL as `nats` (the file's key or `--nats`) gives it. A daemon built
/// without the `federation` cargo feature links no NATS client, so it refuses every URL: a
/// config that asks for federation fails at once (and in `--check-config`), not silently.
pub fn check_server(url: &str) -> Result<(), String> {
    #[cfg(feature = "federation")]
    {
        url.parse::<async_nats::ServerAddr>()
            .map(drop)
            .map_err(|e| format!("bad NATS URL {url:?}: {e}"))
    }
    #[cfg(not(feature = "federation"))]
    {
        Err(format!(
            "{NO_FEDERATION}; remove nats ({url:?}) from the config and flags, or build askbusd with it"
        ))
    }
}

/// Why a daemon built without federation refuses `nats`.
#[cfg(not(feature = "federation"))]
pub const NO_FEDERATION: &str =
    "this askbusd was built without federation (the `federation` cargo feature)";

/// What every node's reply inbox prefix starts with, its name following.
#[cfg(feature = "federation")]
pub const INBOX: &str = "_INBOX_";

/// A node's reply inbox prefix: `_INBOX_<node>` (a node may subscribe only to its own).
#[cfg(feature = "federation")]
pub fn inbox_prefix(node: &str) -> String {
    format!("{INBOX}{node}")
}

/// This machine's host name (the telemetry's `node` without federation).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The host name as a node name: other characters become `-`.
pub fn default_node(host: &str) -> String {
    let name: String = host
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

impl FederationConfig {
    /// The broker's sharing policy.
    pub fn policy(&self) -> FedPolicy {
        FedPolicy {
            node: self.node.as_str().into(),
            share_uids: if !self.share {
                BTreeSet::new()
            } else {
                match &self.share_users {
                    ShareUsers::Own => BTreeSet::from([self.own_uid]),
                    ShareUsers::Uids(u) => u.clone(),
                }
            },
            accept: self.accept,
            accept_nodes: self.accept_nodes.clone(),
            shown_as_uid: self.own_uid,
        }
    }

    /// What is unsafe about this link, in words a user can act on (empty when nothing is):
    /// no NATS authentication, or a server beyond this machine reached without TLS. Said once
    /// at start, and by `askbus doctor`.
    pub fn transport_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let auth = self.creds_file.is_some()
            || self.nkey_seed_file.is_some()
            || self.token_file.is_some()
            || self.user.is_some();
        if !auth {
            out.push(
                "federating with no NATS authentication: any client of the server can read \
                 this node's questions and answer them (set creds_file, nkey_seed_file, \
                 token_file or user/password_file; see docs/nats-server.conf)"
                    .to_owned(),
            );
        }
        let tls = self.tls_ca.is_some() || self.tls_cert.is_some();
        for url in &self.servers {
            let (scheme, rest) = url.split_once("://").unwrap_or(("nats", url));
            if tls || scheme.eq_ignore_ascii_case("tls") {
                continue;
            }
            let host_port = rest.rsplit('@').next().unwrap_or(rest);
            let host = match host_port.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(v6),
                None => host_port.split(':').next().unwrap_or(host_port),
            };
            let loopback = host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                out.push(format!(
                    "NATS server {url} is not on this machine and is reached without TLS: \
                     question text and answers travel in the clear (use tls:// with tls_ca)"
                ));
            }
        }
        out
    }

    /// The connect options, with credentials and TLS read from their files.
    #[cfg(feature = "federation")]
    pub async fn connect_options(&self) -> Result<async_nats::ConnectOptions, FederationError> {
        if self.require_tls {
            if let Some(w) = self.transport_warnings().into_iter().next() {
                return Err(FederationError::Invalid(format!("require_tls: {w}")));
            }
        }
        let read = |what: &'static str, path: &PathBuf| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_owned())
                .map_err(|source| FederationError::File {
                    what,
                    path: path.clone(),
                    source,
                })
        };
        let mut o = match &self.creds_file {
            Some(path) => async_nats::ConnectOptions::with_credentials_file(path.clone())
                .await
                .map_err(|source| FederationError::File {
                    what: "creds file",
                    path: path.clone(),
                    source,
                })?,
            None => async_nats::ConnectOptions::new(),
        };
        if let Some(path) = &self.nkey_seed_file {
            o = o.nkey(read("nkey seed file", path)?);
        }
        if let Some(path) = &self.token_file {
            o = o.token(read("token file", path)?);
        }
        match (&self.user, &self.password_file) {
            (Some(user), Some(path)) => {
                o = o.user_and_password(user.clone(), read("password file", path)?);
            }
            (None, None) => {}
            _ => {
                return Err(FederationError::Invalid(
                    "user and password_file go together".into(),
                ))
            }
        }
        if let Some(ca) = &self.tls_ca {
            read("TLS CA", ca)?;
            o = o.add_root_certificates(ca.clone()).require_tls(true);
        }
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                read("TLS client certificate", cert)?;
                read("TLS client key", key)?;
                o = o
                    .add_client_certificate(cert.clone(), key.clone())
                    .require_tls(true);
            }
            (None, None) => {}
            _ => {
                return Err(FederationError::Invalid(
                    "tls_cert and tls_key go together".into(),
                ))
            }
        }
        for s in &self.servers {
            check_server(s).map_err(FederationError::Invalid)?;
        }
        Ok(o.name(format!("askbusd {}", self.node))
            // Replies to this node's requests come to an inbox only it may subscribe to, and
            // the origin checks an answer's reply subject names its sender.
            .custom_inbox_prefix(inbox_prefix(&self.node))
            // A node reads `P.q.*` for the others' shares: never its own back.
            .no_echo()
            .retry_on_initial_connect()
            .max_reconnects(None)
            .request_timeout(Some(self.answer_timeout))
            // Back in reach soon after the server is: at most 2 s between attempts.
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64 * 100).min(2000))
            }))
    }
}
