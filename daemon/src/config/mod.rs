//! The daemon's configuration file (TOML): one key per command-line flag plus the `[access]`
//! rules, parsed strictly (an unknown key or a bad value is an error naming the key and its
//! line), layered under the flags (a flag wins over the file, the file over the default), and
//! resolved into the settings the daemon runs with. How each kind of value is read and
//! checked is in `fields`; reading the file, and errors that name the key and its line, in
//! `file`.

mod fields;
mod file;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::access::{AccessRules, Principals};
use crate::broker::Limits;
use crate::federation::config::{self as federation_config, FederationConfig, ShareUsers};
use crate::metrics::MetricsListen;
use crate::paths::effective_uid;
use crate::protocol::NoUiPolicy;
use crate::protocol::DEFAULT_MAX_FRAME_BYTES;

use fields::{
    at_least, between, group, groups, log_filter, metrics_listen, nats_servers, node_name,
    node_names, prefix, some_users, telemetry, users,
};
pub use fields::{parse_group, split_servers};
pub use file::{load, parse, ConfigError};

/// The bounds of the numeric settings, shared by the flags and the file.
pub mod bounds {
    pub const MIN_FRAME_BYTES: u64 = 64;
    pub const MAX_FRAME_BYTES: u64 = u32::MAX as u64;
    pub const MIN_QUEUE_BYTES: u64 = 1024;
    pub const MIN_PENDING_BYTES_PER_UID: u64 = 1024;
    pub const MAX_THREADS: u64 = 1024;
}

/// Where telemetry goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Telemetry {
    Off,
    /// The default path (`telemetry = true`).
    Default,
    At(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `--no-ui POLICY` on both command lines, read as the protocol's own words (the policy lives
/// in the client crate, which has no clap), so no mirror enum has to be kept in step.
pub fn no_ui_arg() -> impl clap::builder::TypedValueParser<Value = NoUiPolicy> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    let words = [NoUiPolicy::Wait, NoUiPolicy::Reject].map(NoUiPolicy::as_str);
    PossibleValuesParser::new(words).map(|s| NoUiPolicy::parse(&s).expect("a possible value"))
}

/// One layer of settings: the file's, or the flags'. `None` leaves the key to the layer below.
///
/// Declared once for both: each field is a flag (clap, `--max-pending`) and a key of the file
/// (serde, `max_pending`), with the same bounds; the doc comments are the flags' `--help`.
/// Only the negations (`--no-telemetry`, `--no-store`) and the options that are not settings
/// (`--config`, `--check-config`, the policy switches) are the binary's own.
// The field docs are `askbusd --help` as printed: `[federation]` and `<uid>` are plain text.
#[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, Default, PartialEq, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Socket to listen on, unless systemd passes one [default: $ASKBUS_SOCKET, else
    /// $XDG_RUNTIME_DIR/askbus.sock, else /run/askbus/askbus.sock for root, else
    /// /tmp/askbus-<uid>/askbus.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Append one JSON line per request to PATH [default: $STATE_DIRECTORY/telemetry.jsonl
    /// (systemd), else $XDG_STATE_HOME/askbus/telemetry.jsonl, else
    /// ~/.local/state/askbus/telemetry.jsonl]
    #[serde(default, deserialize_with = "telemetry")]
    #[arg(long, value_name = "PATH", value_parser = path_arg, conflicts_with = "no_telemetry")]
    pub telemetry: Option<Telemetry>,
    /// Let GROUP (a name or gid) read the telemetry file: it is created 0640 with that
    /// group instead of 0600
    #[serde(default, deserialize_with = "group")]
    #[arg(long, value_name = "GROUP", value_parser = parse_group)]
    pub telemetry_group: Option<u32>,
    /// Timeout of a request that gives no timeoutMs [default: 600000]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub default_timeout_ms: Option<u64>,
    /// Largest timeout a request may have; larger ones are clamped to it [default: 86400000]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_timeout_ms: Option<u64>,
    /// What a request gets when no UI is subscribed and it gives no noUi: wait for a UI until
    /// its timeout, or reject at once with reason no-ui [default: wait]
    #[arg(long, value_name = "POLICY", value_parser = no_ui_arg())]
    pub no_ui: Option<NoUiPolicy>,
    /// Largest frame accepted, in bytes (a longer length prefix closes the connection)
    /// [default: 1048576]
    #[serde(
        default,
        deserialize_with = "between::<_, { bounds::MIN_FRAME_BYTES }, { bounds::MAX_FRAME_BYTES }>"
    )]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(bounds::MIN_FRAME_BYTES..=bounds::MAX_FRAME_BYTES))]
    pub max_frame_bytes: Option<u64>,
    /// Pending requests one connection may have [default: 128]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pending_per_connection: Option<u64>,
    /// Pending requests all connections of one uid may have [default: --max-pending]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pending_per_uid: Option<u64>,
    /// Bytes the pending questions of one uid may hold (normalized text and ids); a request
    /// past it is refused with too-many-pending [default: 67108864 (64 MiB)]
    #[serde(
        default,
        deserialize_with = "at_least::<_, { bounds::MIN_PENDING_BYTES_PER_UID }>"
    )]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(bounds::MIN_PENDING_BYTES_PER_UID..))]
    pub max_pending_bytes_per_uid: Option<u64>,
    /// Pending requests the daemon holds in total [default: 262144]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pending: Option<u64>,
    /// Connections served at once; more are refused with too-many-connections [default: 4096]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,
    /// Connections one uid may have at once [default: --max-connections]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_uid: Option<u64>,
    /// Unsent bytes a connection may have queued before it is disconnected as not reading
    /// [default: 8388608]
    #[serde(
        default,
        deserialize_with = "at_least::<_, { bounds::MIN_QUEUE_BYTES }>"
    )]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(bounds::MIN_QUEUE_BYTES..))]
    pub max_queue_bytes: Option<u64>,
    /// How long one frame may take to arrive once its first byte has; a slower peer is cut
    /// [default: 10000]
    #[serde(default, deserialize_with = "at_least::<_, 1>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub frame_timeout_ms: Option<u64>,
    /// Serve Prometheus metrics at /metrics on a loopback IP:PORT or a Unix socket PATH
    #[serde(default, deserialize_with = "metrics_listen")]
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<MetricsListen>,
    /// Log line format [default: text]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// Log filter: a level, or target=level pairs (tracing's Targets syntax) [default: info]
    #[serde(default, deserialize_with = "log_filter")]
    #[arg(long, value_name = "FILTER", env = "ASKBUS_LOG")]
    pub log_level: Option<String>,
    /// Threads serving connections: 1 runs everything on one thread (the broker is one lock,
    /// and on a small machine more workers mostly contend for it); more adds worker threads
    /// that validate and parse in parallel [default: 1]
    #[serde(default, deserialize_with = "between::<_, 1, { bounds::MAX_THREADS }>")]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=bounds::MAX_THREADS))]
    pub threads: Option<u64>,
    /// Only in the file: there are no flags for the access rules.
    #[arg(skip)]
    pub access: Option<AccessOptions>,
    /// Federate with the other askbusd nodes through these NATS servers (core NATS, no
    /// JetStream; docs/nats-server.conf); credentials, TLS and sharing go in the file's
    /// [federation] (there: a string of comma-separated URLs or a list)
    // `::std::vec::Vec`: one flag holding the whole list, not a repeated flag (clap's rule).
    #[serde(default, deserialize_with = "nats_servers")]
    #[arg(long, value_name = "URL[,URL...]", value_parser = nats_arg)]
    pub nats: Option<::std::vec::Vec<String>>,
    /// This node's name among the federated ones (A-Z a-z 0-9 - _) [default: the host name]
    #[serde(default, deserialize_with = "node_name")]
    #[arg(long, value_name = "NAME", value_parser = node_arg)]
    pub node: Option<String>,
    /// Only in the file: credentials, TLS, prefix, what is shared and shown.
    #[arg(skip)]
    pub federation: Option<FederationOptions>,
    /// The flag for `[federation] require_tls` (`--require-tls`, the binary's own, as the
    /// negations are: a switch only turns it on). Not a key: the file sets it in [federation].
    #[serde(skip)]
    #[arg(skip)]
    pub require_tls: Option<bool>,
    /// Keep pending requests and every decision in the SQLite store at PATH [default:
    /// $STATE_DIRECTORY/askbus.db (systemd), else $XDG_STATE_HOME/askbus/askbus.db, else
    /// ~/.local/state/askbus/askbus.db]
    // In the file: a path, true (the default path) or false (`--no-store`).
    #[serde(default, deserialize_with = "telemetry")]
    #[arg(long, value_name = "PATH", value_parser = path_arg, conflicts_with = "no_store")]
    pub store: Option<Telemetry>,
    /// How long a request waits for its producer to come back (after a restart or a dropped
    /// connection) before it ends producer-gone [default: 60s]
    #[serde(default, deserialize_with = "duration")]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub resume_grace: Option<Duration>,
    /// How long ended records are kept in the store [default: 30d]
    #[serde(default, deserialize_with = "duration")]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub retention: Option<Duration>,
    /// Whether ended records keep question text, answers and diffs [default: keep]
    #[arg(long, value_name = "MODE")]
    pub history_text: Option<HistoryTextOption>,
    /// When the store's commits reach the disk: `full` fsyncs each commit before any peer
    /// hears of it (a power cut loses nothing acknowledged); `normal` does not (a crash or
    /// SIGKILL of askbusd still loses nothing; a power cut can lose the last commits)
    /// [default: full]
    #[arg(long, value_name = "MODE")]
    pub store_sync: Option<crate::store::StoreSync>,
}

/// `--telemetry PATH`, `--store PATH`: a path given on the command line.
fn path_arg(s: &str) -> Result<Telemetry, String> {
    if s.is_empty() {
        return Err("an empty path".into());
    }
    Ok(Telemetry::At(PathBuf::from(s)))
}

/// `--nats URL[,URL...]`, checked as the file's `nats` is.
fn nats_arg(s: &str) -> Result<Vec<String>, String> {
    let list = split_servers(s);
    for url in &list {
        federation_config::check_server(url)?;
    }
    Ok(list)
}

/// `--node NAME`, checked as the file's `node` is.
fn node_arg(s: &str) -> Result<String, String> {
    if federation_config::valid_node(s) {
        Ok(s.to_owned())
    } else {
        Err("a node name is 1 to 64 of A-Z a-z 0-9 - _".into())
    }
}

/// `history_text` / `--history-text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HistoryTextOption {
    Keep,
    Redact,
}

/// The default `--resume-grace`.
pub const DEFAULT_RESUME_GRACE: Duration = Duration::from_secs(60);
/// The default `--retention`: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 86_400);

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s).map(Some).map_err(|e| {
        serde::de::Error::custom(format!("{s:?} is not a duration (like 60s, 30d): {e}"))
    })
}

/// The `[federation]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationOptions {
    #[serde(default, deserialize_with = "prefix")]
    pub prefix: Option<String>,
    pub creds_file: Option<PathBuf>,
    pub nkey_seed_file: Option<PathBuf>,
    pub token_file: Option<PathBuf>,
    pub user: Option<String>,
    pub password_file: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Share this node's questions at all [default: true].
    pub share: Option<bool>,
    /// Whose questions are shared [default: the daemon's own user].
    #[serde(default, deserialize_with = "some_users")]
    pub share_users: Option<BTreeSet<u32>>,
    /// Show other nodes' questions at all [default: true].
    pub accept: Option<bool>,
    /// Show only these nodes' questions [default: every node's].
    #[serde(default, deserialize_with = "node_names")]
    pub accept_nodes: Option<BTreeSet<String>>,
    #[serde(default, deserialize_with = "at_least::<_, 100>")]
    pub heartbeat_ms: Option<u64>,
    #[serde(default, deserialize_with = "at_least::<_, 1000>")]
    pub node_timeout_ms: Option<u64>,
    #[serde(default, deserialize_with = "at_least::<_, 100>")]
    pub answer_timeout_ms: Option<u64>,
    /// Refuse to federate without authentication, or to a non-loopback server without TLS
    /// [default: false: warn once at start].
    pub require_tls: Option<bool>,
}

/// The `[access]` table: users and groups by name or number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessOptions {
    #[serde(default, deserialize_with = "users")]
    pub producer_users: BTreeSet<u32>,
    #[serde(default, deserialize_with = "groups")]
    pub producer_groups: BTreeSet<u32>,
    #[serde(default, deserialize_with = "users")]
    pub ui_users: BTreeSet<u32>,
    #[serde(default, deserialize_with = "groups")]
    pub ui_groups: BTreeSet<u32>,
    #[serde(default, deserialize_with = "users")]
    pub operator_users: BTreeSet<u32>,
    #[serde(default, deserialize_with = "groups")]
    pub operator_groups: BTreeSet<u32>,
}

/// Everything the daemon (`server::Daemon`) is configured with, resolved.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    /// `None` disables telemetry.
    pub telemetry: Option<PathBuf>,
    /// The group given read access to the telemetry file (0640), if any.
    pub telemetry_group: Option<u32>,
    pub limits: Limits,
    pub max_frame_bytes: usize,
    pub max_connections: usize,
    /// Connections one uid may have at once (dbus-broker's per-user accounting).
    pub max_connections_per_uid: usize,
    /// Unsent bytes a connection may have queued before it is dropped as not reading.
    pub max_queue_bytes: usize,
    /// How long a frame may take to arrive once it has started.
    pub frame_timeout: Duration,
    /// Who may connect, and as what.
    pub access: AccessRules,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_listen: Option<MetricsListen>,
    /// Federation over NATS, when `--nats` is given.
    pub federation: Option<FederationConfig>,
    /// The store; `None` with `--no-store` (memory only, protocol v1 exactly).
    pub store: Option<crate::store::StoreOptions>,
    /// How long a request waits for its producer to re-attach (with a store).
    pub resume_grace: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: crate::paths::default_socket_path(),
            telemetry: Some(crate::paths::default_telemetry_path()),
            telemetry_group: None,
            limits: Limits::default(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_connections: 4096,
            max_connections_per_uid: 4096,
            max_queue_bytes: 8 * 1024 * 1024,
            frame_timeout: Duration::from_secs(10),
            access: AccessRules::new(effective_uid()),
            metrics_listen: None,
            federation: None,
            store: Some(crate::store::StoreOptions {
                path: askbus::history::default_store_path(),
                retention: DEFAULT_RETENTION,
                history_text: crate::store::HistoryText::Keep,
                sync: crate::store::StoreSync::Full,
            }),
            resume_grace: DEFAULT_RESUME_GRACE,
        }
    }
}

/// Everything askbusd runs with, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub daemon: DaemonConfig,
    pub log_format: LogFormat,
    pub log_level: String,
    pub threads: Option<usize>,
}

impl Options {
    /// This layer over `below`: each key this layer sets wins.
    pub fn over(self, below: Options) -> Options {
        Options {
            socket: self.socket.or(below.socket),
            telemetry: self.telemetry.or(below.telemetry),
            default_timeout_ms: self.default_timeout_ms.or(below.default_timeout_ms),
            max_timeout_ms: self.max_timeout_ms.or(below.max_timeout_ms),
            no_ui: self.no_ui.or(below.no_ui),
            max_frame_bytes: self.max_frame_bytes.or(below.max_frame_bytes),
            max_pending_per_connection: self
                .max_pending_per_connection
                .or(below.max_pending_per_connection),
            max_pending_per_uid: self.max_pending_per_uid.or(below.max_pending_per_uid),
            max_pending_bytes_per_uid: self
                .max_pending_bytes_per_uid
                .or(below.max_pending_bytes_per_uid),
            telemetry_group: self.telemetry_group.or(below.telemetry_group),
            max_pending: self.max_pending.or(below.max_pending),
            max_connections: self.max_connections.or(below.max_connections),
            max_connections_per_uid: self
                .max_connections_per_uid
                .or(below.max_connections_per_uid),
            max_queue_bytes: self.max_queue_bytes.or(below.max_queue_bytes),
            frame_timeout_ms: self.frame_timeout_ms.or(below.frame_timeout_ms),
            log_format: self.log_format.or(below.log_format),
            log_level: self.log_level.or(below.log_level),
            threads: self.threads.or(below.threads),
            metrics_listen: self.metrics_listen.or(below.metrics_listen),
            access: self.access.or(below.access),
            nats: self.nats.or(below.nats),
            node: self.node.or(below.node),
            federation: self.federation.or(below.federation),
            require_tls: self.require_tls.or(below.require_tls),
            store: self.store.or(below.store),
            resume_grace: self.resume_grace.or(below.resume_grace),
            retention: self.retention.or(below.retention),
            history_text: self.history_text.or(below.history_text),
            store_sync: self.store_sync.or(below.store_sync),
        }
    }

    /// The settings, with the defaults for every key no layer set. `own_uid` is the uid the
    /// access rules always allow.
    pub fn resolve(self, own_uid: u32) -> Settings {
        let d = DaemonConfig::default();
        let dl = Limits::default();
        let max_timeout_ms = self.max_timeout_ms.unwrap_or(dl.max_timeout_ms);
        let max_pending_total = self.max_pending.map_or(dl.max_pending_total, as_usize);
        let max_connections = self.max_connections.map_or(d.max_connections, as_usize);
        let access = self.access.unwrap_or_default();
        let rules = AccessRules {
            own_uid,
            producers: Principals {
                uids: access.producer_users,
                gids: access.producer_groups,
            },
            uis: Principals {
                uids: access.ui_users,
                gids: access.ui_groups,
            },
            operators: Principals {
                uids: access.operator_users,
                gids: access.operator_groups,
            },
        };
        Settings {
            daemon: DaemonConfig {
                socket: self
                    .socket
                    .unwrap_or_else(crate::paths::default_socket_path),
                telemetry: match self.telemetry.unwrap_or(Telemetry::Default) {
                    Telemetry::Off => None,
                    Telemetry::Default => Some(crate::paths::default_telemetry_path()),
                    Telemetry::At(p) => Some(p),
                },
                telemetry_group: self.telemetry_group,
                limits: Limits {
                    default_timeout_ms: self
                        .default_timeout_ms
                        .unwrap_or(dl.default_timeout_ms)
                        .min(max_timeout_ms),
                    max_timeout_ms,
                    no_ui: self.no_ui.unwrap_or(dl.no_ui),
                    max_pending_per_connection: self
                        .max_pending_per_connection
                        .map_or(dl.max_pending_per_connection, as_usize),
                    // Unset, a uid may hold as many as the daemon does.
                    max_pending_per_uid: self
                        .max_pending_per_uid
                        .map_or(max_pending_total, as_usize),
                    max_pending_bytes_per_uid: self
                        .max_pending_bytes_per_uid
                        .map_or(dl.max_pending_bytes_per_uid, as_usize),
                    max_pending_total,
                },
                max_frame_bytes: self.max_frame_bytes.map_or(d.max_frame_bytes, as_usize),
                max_connections,
                max_connections_per_uid: self
                    .max_connections_per_uid
                    .map_or(max_connections, as_usize),
                max_queue_bytes: self.max_queue_bytes.map_or(d.max_queue_bytes, as_usize),
                frame_timeout: self
                    .frame_timeout_ms
                    .map_or(d.frame_timeout, std::time::Duration::from_millis),
                access: rules,
                metrics_listen: self.metrics_listen,
                store: {
                    let path = match self.store.unwrap_or(Telemetry::Default) {
                        Telemetry::Off => None,
                        Telemetry::Default => Some(askbus::history::default_store_path()),
                        Telemetry::At(p) => Some(p),
                    };
                    path.map(|path| crate::store::StoreOptions {
                        path,
                        retention: self.retention.unwrap_or(DEFAULT_RETENTION),
                        history_text: match self.history_text {
                            Some(HistoryTextOption::Redact) => crate::store::HistoryText::Redact,
                            _ => crate::store::HistoryText::Keep,
                        },
                        sync: self.store_sync.unwrap_or_default(),
                    })
                },
                resume_grace: self.resume_grace.unwrap_or(DEFAULT_RESUME_GRACE),
                federation: self.nats.filter(|s| !s.is_empty()).map(|servers| {
                    let f = self.federation.unwrap_or_default();
                    FederationConfig {
                        servers,
                        node: self.node.unwrap_or_else(|| {
                            federation_config::default_node(&federation_config::host_name())
                        }),
                        prefix: f
                            .prefix
                            .unwrap_or_else(|| federation_config::DEFAULT_PREFIX.into()),
                        creds_file: f.creds_file,
                        nkey_seed_file: f.nkey_seed_file,
                        token_file: f.token_file,
                        user: f.user,
                        password_file: f.password_file,
                        tls_ca: f.tls_ca,
                        tls_cert: f.tls_cert,
                        tls_key: f.tls_key,
                        share: f.share.unwrap_or(true),
                        share_users: f.share_users.map_or(ShareUsers::Own, ShareUsers::Uids),
                        accept: f.accept.unwrap_or(true),
                        accept_nodes: f.accept_nodes.unwrap_or_default(),
                        heartbeat: Duration::from_millis(f.heartbeat_ms.unwrap_or(2000)),
                        node_timeout: Duration::from_millis(f.node_timeout_ms.unwrap_or(6000)),
                        answer_timeout: Duration::from_millis(f.answer_timeout_ms.unwrap_or(5000)),
                        max_frame_bytes: self.max_frame_bytes.map_or(d.max_frame_bytes, as_usize),
                        require_tls: self.require_tls.or(f.require_tls).unwrap_or(false),
                        own_uid,
                    }
                }),
            },
            log_format: self.log_format.unwrap_or_default(),
            log_level: self.log_level.unwrap_or_else(|| "info".to_owned()),
            threads: self.threads.map(as_usize),
        }
    }
}

fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;
