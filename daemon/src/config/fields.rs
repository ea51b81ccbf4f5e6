//! The configuration file's field readers: each checks one kind of value (a bounded number,
//! a log filter, a listen address, user and group names resolved to ids now, NATS URLs, node
//! names) as it is read, so a bad value is an error naming its key and line.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

use super::Telemetry;
use crate::federation::config as federation_config;
use crate::metrics::MetricsListen;

pub(super) fn at_least<'de, D: Deserializer<'de>, const MIN: u64>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if n < MIN {
        return Err(de::Error::custom(format!(
            "must be at least {MIN}, not {n}"
        )));
    }
    Ok(Some(n))
}

pub(super) fn between<'de, D: Deserializer<'de>, const MIN: u64, const MAX: u64>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    let n = u64::deserialize(d)?;
    if !(MIN..=MAX).contains(&n) {
        return Err(de::Error::custom(format!(
            "must be between {MIN} and {MAX}, not {n}"
        )));
    }
    Ok(Some(n))
}

pub(super) fn log_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse::<tracing_subscriber::filter::Targets>()
        .map_err(|e| de::Error::custom(format!("bad log filter {s:?}: {e}")))?;
    Ok(Some(s))
}

pub(super) fn metrics_listen<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<MetricsListen>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(de::Error::custom)
}

/// `telemetry = "PATH"`, or `true` (the default path), or `false` (none).
pub(super) fn telemetry<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Telemetry>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Telemetry;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a file path, or true or false")
        }
        fn visit_bool<E: de::Error>(self, on: bool) -> Result<Telemetry, E> {
            Ok(if on {
                Telemetry::Default
            } else {
                Telemetry::Off
            })
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Telemetry, E> {
            if s.is_empty() {
                return Err(E::custom("an empty path; use false for no telemetry"));
            }
            Ok(Telemetry::At(PathBuf::from(s)))
        }
    }
    d.deserialize_any(V).map(Some)
}

/// A list of users (names or uids) or groups (names or gids), resolved to numbers now, so a
/// misspelt name is an error at load, not a rule that silently matches nobody.
struct Ids {
    groups: bool,
}

impl<'de> Visitor<'de> for Ids {
    type Value = BTreeSet<u32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.groups { "group" } else { "user" };
        write!(f, "a list of {what} names or numeric ids")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BTreeSet<u32>, A::Error> {
        let mut ids = BTreeSet::new();
        while let Some(item) = seq.next_element::<Id>()? {
            let id = match item {
                Id::Number(n) => u32::try_from(n)
                    .map_err(|_| de::Error::custom(format!("{n} is not a valid id")))?,
                Id::Name(name) => self.lookup(&name).map_err(de::Error::custom)?,
            };
            ids.insert(id);
        }
        Ok(ids)
    }
}

impl Ids {
    fn lookup(&self, name: &str) -> Result<u32, String> {
        use nix::unistd::{Group, User};
        if self.groups {
            match Group::from_name(name) {
                Ok(Some(g)) => Ok(g.gid.as_raw()),
                Ok(None) => Err(format!("no group named {name:?}")),
                Err(e) => Err(format!("cannot look up group {name:?}: {e}")),
            }
        } else {
            match User::from_name(name) {
                Ok(Some(u)) => Ok(u.uid.as_raw()),
                Ok(None) => Err(format!("no user named {name:?}")),
                Err(e) => Err(format!("cannot look up user {name:?}: {e}")),
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "a name or a numeric id")]
enum Id {
    Number(i64),
    Name(String),
}

pub(super) fn some_users<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeSet<u32>>, D::Error> {
    users(d).map(Some)
}

/// `nats = "nats://a:4222,nats://b:4222"` or `nats = ["nats://a:4222", …]`.
pub(super) fn nats_servers<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Servers {
        One(String),
        Many(Vec<String>),
    }
    let list = match Servers::deserialize(d)? {
        Servers::One(s) => split_servers(&s),
        Servers::Many(v) => v,
    };
    for s in &list {
        federation_config::check_server(s).map_err(de::Error::custom)?;
    }
    Ok(Some(list))
}

/// `--nats URL[,URL…]` as a list.
pub fn split_servers(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

pub(super) fn node_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if !federation_config::valid_node(&s) {
        return Err(de::Error::custom(format!(
            "node name {s:?} must be 1 to 64 of A-Z a-z 0-9 - _"
        )));
    }
    Ok(Some(s))
}

pub(super) fn node_names<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeSet<String>>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    if let Some(bad) = v.iter().find(|s| !federation_config::valid_node(s)) {
        return Err(de::Error::custom(format!(
            "node name {bad:?} must be 1 to 64 of A-Z a-z 0-9 - _"
        )));
    }
    Ok(Some(v.into_iter().collect()))
}

pub(super) fn prefix<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    if !federation_config::valid_prefix(&s) {
        return Err(de::Error::custom(format!(
            "prefix {s:?} must be 1 to 32 of A-Z a-z 0-9 - _"
        )));
    }
    Ok(Some(s))
}

pub(super) fn users<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<u32>, D::Error> {
    d.deserialize_seq(Ids { groups: false })
}

pub(super) fn groups<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<u32>, D::Error> {
    d.deserialize_seq(Ids { groups: true })
}

/// One group, by name or number, resolved now (as the access rules' groups are).
pub(super) fn group<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let id = match Id::deserialize(d)? {
        Id::Number(n) => {
            u32::try_from(n).map_err(|_| de::Error::custom(format!("{n} is not a valid id")))?
        }
        Id::Name(name) => Ids { groups: true }
            .lookup(&name)
            .map_err(de::Error::custom)?,
    };
    Ok(Some(id))
}

/// A group for a flag (`--telemetry-group NAME|GID`).
pub fn parse_group(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) => Ok(n),
        Err(_) => Ids { groups: true }.lookup(s),
    }
}
