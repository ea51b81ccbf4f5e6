//! The history askbusd keeps when it has a store: where the store file is by default, the
//! record every reader shares (the `history` frame's `records`, `askbus history --json`),
//! and the chain that makes the stored records tamper-evident.
//!
//! The chain: every ended record carries `hash = SHA-256(prev || "\n" || fields)`, where
//! `prev` is the hex hash of the record ended before it (or the anchor retention left, or 64
//! zeros for the first) and `fields` the JSON array of its stored fields in
//! [`ChainFields`]' order, as stored (after any redaction in force). Whether its response
//! reached its producer (`delivered`) is not a decision and is left out.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::ProducerInfo;

#[cfg(feature = "store")]
pub mod store;

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(ms: i64) -> String {
    let t = SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, mo, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.max(0) % 1000
    )
}

/// The wire's time parser, which the store's filters share.
pub use crate::protocol::time::parse_rfc3339_ms;

/// Days since 1970-01-01 as a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// The chain's start: the `prev` of the first record ever stored.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The store when none is given: `$STATE_DIRECTORY/askbus.db` (systemd's StateDirectory=),
/// else `$XDG_STATE_HOME/askbus/askbus.db`, else `~/.local/state/askbus/askbus.db`, else
/// `/var/lib/askbus/askbus.db` (resolved as the telemetry file is).
pub fn default_store_path() -> PathBuf {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(dirs) = env("STATE_DIRECTORY") {
        if let Some(dir) = dirs.split(':').find(|d| !d.is_empty()) {
            return Path::new(dir).join("askbus.db");
        }
    }
    if let Some(dir) = env("XDG_STATE_HOME") {
        return Path::new(&dir).join("askbus/askbus.db");
    }
    if let Some(home) = env("HOME") {
        return Path::new(&home).join(".local/state/askbus/askbus.db");
    }
    PathBuf::from("/var/lib/askbus/askbus.db")
}

/// One request's record, as `history` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub correlation_id: String,
    /// `question` or `approval`.
    pub kind: String,
    /// RFC 3339 UTC.
    pub asked_at: String,
    /// RFC 3339 UTC; `null` while pending.
    pub ended_at: Option<String>,
    /// When it times out (wall clock, RFC 3339 UTC).
    pub deadline: String,
    /// The terminal reason (`answered`, `timeout`, …), or `pending`.
    pub reason: String,
    pub producer: ProducerInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub context: Option<Value>,
    /// A question's normalized questions (`null` once redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<Value>,
    /// An approval's tool call and details (`null` once redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// A question's answers (`null` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Value>,
    /// An approval's decision: `{outcome, confirmed, message?}` (`null` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
    pub decided_by: Option<Value>,
    pub shown_sha256: String,
    /// Whether its producer received its terminal frame.
    pub delivered: bool,
}

/// A record's stored fields, in the chain's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFields<'a> {
    pub chain: i64,
    pub correlation_id: &'a str,
    pub kind: &'a str,
    pub uid: i64,
    pub pid: Option<i64>,
    pub client: Option<&'a str>,
    pub node: Option<&'a str>,
    pub context: Option<&'a str>,
    pub body: Option<&'a str>,
    pub asked_at_ms: i64,
    pub deadline_ms: i64,
    pub timeout_ms: i64,
    pub shown_sha256: &'a str,
    pub ended_at_ms: i64,
    pub reason: &'a str,
    pub response: Option<&'a str>,
    pub decided_by: Option<&'a str>,
}

/// The hex SHA-256 chaining `fields` to the record before it (`prev`) (with the `shown`
/// feature, which brings the hash).
#[cfg(feature = "shown")]
pub fn chain_hash(prev: &str, f: &ChainFields<'_>) -> String {
    let fields = serde_json::json!([
        f.chain,
        f.correlation_id,
        f.kind,
        f.uid,
        f.pid,
        f.client,
        f.node,
        f.context,
        f.body,
        f.asked_at_ms,
        f.deadline_ms,
        f.timeout_ms,
        f.shown_sha256,
        f.ended_at_ms,
        f.reason,
        f.response,
        f.decided_by,
    ]);
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(fields.to_string().as_bytes());
    hex(&h.finalize())
}

#[cfg(feature = "shown")]
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(all(test, feature = "shown"))]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_796_342_400_123), "2026-12-04T00:00:00.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn rfc3339_reads_back_what_it_writes_and_refuses_the_rest() {
        for ms in [0, 1_796_342_400_123, 951_782_400_000, 1_796_999_999_999] {
            assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms));
        }
        assert_eq!(
            parse_rfc3339_ms("2026-12-04T01:30:00.5+01:30"),
            Some(1_796_342_400_500)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-12-03t20:00:00-04:00"),
            Some(1_796_342_400_000)
        );
        for bad in [
            "",
            "2026-12-04",
            "2026-13-04T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-12-04T24:00:00Z",
            "2026-12-04T00:00:00",
            "2026-12-04T00:00:00.Z",
            "2026-12-04T00:00:00+0100",
            "2026-12-04T00:00:00Zjunk",
            "２026-12-04T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn any_field_changes_the_hash_and_the_previous_one_too() {
        let f = ChainFields {
            chain: 1,
            correlation_id: "a",
            kind: "question",
            uid: 1000,
            pid: Some(7),
            client: None,
            node: None,
            context: None,
            body: Some("[]"),
            asked_at_ms: 1,
            deadline_ms: 2,
            timeout_ms: 1,
            shown_sha256: "x",
            ended_at_ms: 2,
            reason: "answered",
            response: None,
            decided_by: None,
        };
        let h = chain_hash(GENESIS, &f);
        assert_eq!(h.len(), 64);
        assert_ne!(h, chain_hash(&h, &f));
        let edited = ChainFields {
            reason: "timeout",
            ..f.clone()
        };
        assert_ne!(h, chain_hash(GENESIS, &edited));
    }
}
