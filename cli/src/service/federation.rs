//! Federation as a service: the drop-in `askbus service install` writes when askbusd is to
//! reach NATS (`--nats`, or `nats` in the config it will read). The shipped units let askbusd
//! open Unix sockets only; the drop-in adds `AF_INET`/`AF_INET6`, and for the system unit,
//! which also denies every IP address, allows the NATS servers' addresses (and the resolvers'
//! when a server is named by host name) and nothing else. A drop-in rather than an edited unit,
//! so the shipped units stay the one source and `systemd-analyze security` still rates them.

use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{Scope, MARKER};

/// The drop-in's file name in `askbusd.service.d/`.
pub(super) const DROP_IN: &str = "askbus-federation.conf";

/// A NATS server's address, read as askbusd's NATS client (async-nats' `ServerAddr`) reads
/// it: `nats://` when no scheme is given, one of `nats`, `tls`, `ws`, `wss`, port 4222 unless
/// the URL or its scheme says another. Kept here so `askbus` does not link a NATS client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NatsAddr(url::Url);

impl std::str::FromStr for NatsAddr {
    type Err = std::io::Error;

    fn from_str(input: &str) -> std::io::Result<NatsAddr> {
        use std::io::{Error, ErrorKind};
        let url: url::Url = if input.contains("://") {
            input.parse()
        } else {
            format!("nats://{input}").parse()
        }
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("NATS server URL is invalid: {e}"),
            )
        })?;
        if !matches!(url.scheme(), "nats" | "tls" | "ws" | "wss") {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("invalid scheme for NATS server URL: {}", url.scheme()),
            ));
        }
        Ok(NatsAddr(url))
    }
}

impl NatsAddr {
    /// The host, an IPv6 address without its brackets.
    pub(super) fn host(&self) -> &str {
        match self.0.host() {
            Some(url::Host::Ipv6(_)) => {
                let h = self.0.host_str().unwrap_or_default();
                h.strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .unwrap_or(h)
            }
            Some(_) => self.0.host_str().unwrap_or_default(),
            None => "",
        }
    }

    pub(super) fn port(&self) -> u16 {
        self.0.port_or_known_default().unwrap_or(4222)
    }

    pub(super) fn as_url_str(&self) -> &str {
        self.0.as_str()
    }
}

/// The NATS servers `--nats` gives (each may be a comma-separated list, as askbusd's flag),
/// checked as askbusd checks them.
pub(super) fn parse_servers(given: &[String]) -> Result<Vec<NatsAddr>> {
    let mut servers = Vec::new();
    for url in given.iter().flat_map(|g| g.split(',')) {
        let url = url.trim();
        if url.is_empty() {
            continue;
        }
        servers.push(
            url.parse::<NatsAddr>()
                .with_context(|| format!("--nats {url}: not a NATS server URL"))?,
        );
    }
    Ok(servers)
}

/// The `nats` of the config file at `path` (a string, comma-separated, or a list), if it
/// exists and sets one. A file that does not parse is left to `askbusd --check-config` to
/// explain: install then writes no drop-in from it.
pub(super) fn servers_in_config(path: &Path) -> Result<Vec<NatsAddr>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Ok(Vec::new());
    };
    let urls: Vec<String> = match table.get("nats") {
        Some(toml::Value::String(s)) => vec![s.clone()],
        Some(toml::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    parse_servers(&urls).with_context(|| format!("in {}", path.display()))
}

/// The example config with `nats` set to `servers` (the commented example line replaced).
pub(super) fn config_with(example: &str, servers: &[NatsAddr]) -> String {
    let list = toml::Value::Array(
        servers
            .iter()
            .map(|s| toml::Value::String(s.as_url_str().to_owned()))
            .collect(),
    );
    let mut out = String::with_capacity(example.len() + 64);
    let mut done = false;
    for line in example.lines() {
        if !done && line.starts_with("#nats = ") {
            out.push_str(&format!(
                "# Set by `askbus service install --nats`.\nnats = {list}"
            ));
            done = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !done {
        // No example line to replace: a top-level key must come before any table.
        out = format!("nats = {list}\n{out}");
    }
    out
}

/// The drop-in for `scope` that lets askbusd reach `servers`. For the system unit, host names
/// are resolved now (a unit's address list takes addresses only), and `resolv_conf`'s name
/// servers are allowed too, as askbusd resolves the name again at each connect.
pub(super) fn drop_in(scope: Scope, servers: &[NatsAddr], resolv_conf: &str) -> Result<String> {
    let flag = match scope {
        Scope::User => "--user",
        Scope::System => "--system",
    };
    // Host and port only: a URL's user and password have no place in a world-readable unit.
    let urls: Vec<String> = servers
        .iter()
        .map(|s| match s.host().parse::<IpAddr>() {
            Ok(IpAddr::V6(ip)) => format!("[{ip}]:{}", s.port()),
            _ => format!("{}:{}", s.host(), s.port()),
        })
        .collect();
    let mut out = format!(
        "{MARKER} {flag}` (askbus {}).\n\
         # askbusd federates through NATS ({}), so it needs network sockets besides its Unix\n\
         # socket. Install rewrites this file from `--nats` or the config's `nats`, and\n\
         # `askbus service uninstall {flag}` removes it.\n\
         [Service]\n\
         RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n",
        env!("CARGO_PKG_VERSION"),
        urls.join(", "),
    );
    if scope == Scope::System {
        let (allow, resolved) = allowed_addresses(servers, resolv_conf)?;
        out.push_str(
            "# The unit denies every IP address (IPAddressDeny=any); these are the NATS servers'\n",
        );
        if resolved {
            out.push_str(
                "# as resolved at install (rerun install when they move) and the name servers of\n\
                 # /etc/resolv.conf, which askbusd asks at each connect.\n",
            );
        } else {
            out.push_str("# addresses.\n");
        }
        out.push_str(&format!("IPAddressAllow={}\n", allow.join(" ")));
    }
    Ok(out)
}

/// What the system unit's `IPAddressAllow=` lists for `servers`, and whether a host name was
/// resolved to get it.
fn allowed_addresses(servers: &[NatsAddr], resolv_conf: &str) -> Result<(Vec<String>, bool)> {
    let mut allow: Vec<String> = Vec::new();
    let mut resolved = false;
    let mut push = |a: String| {
        if !allow.contains(&a) {
            allow.push(a);
        }
    };
    for server in servers {
        let host = server.host();
        if let Ok(ip) = host.parse::<IpAddr>() {
            push(ip.to_string());
        } else if host.eq_ignore_ascii_case("localhost") {
            push("localhost".to_owned());
        } else {
            resolved = true;
            let addrs: Vec<IpAddr> = (host, server.port())
                .to_socket_addrs()
                .with_context(|| {
                    format!(
                        "cannot resolve {host} for the system unit's IPAddressAllow=; give \
                         --nats with the server's address instead"
                    )
                })?
                .map(|a| a.ip())
                .collect();
            if addrs.is_empty() {
                bail!("{host} resolves to no address");
            }
            for ip in addrs {
                push(ip.to_string());
            }
        }
    }
    if resolved {
        for ns in name_servers(resolv_conf) {
            push(ns.to_string());
        }
    }
    Ok((allow, resolved))
}

/// The `nameserver` addresses of a resolv.conf (a zone index such as `%eth0` dropped: the
/// unit's list takes plain addresses).
fn name_servers(resolv_conf: &str) -> Vec<IpAddr> {
    resolv_conf
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("nameserver")).then(|| words.next())?
        })
        .filter_map(|a| a.split('%').next()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(urls: &[&str]) -> Vec<NatsAddr> {
        parse_servers(&urls.iter().map(|u| (*u).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_user_drop_in_allows_network_sockets_only() {
        let text = drop_in(Scope::User, &servers(&["tls://me:secret@hub.example"]), "").unwrap();
        assert!(text.starts_with(MARKER));
        assert!(text.contains("(hub.example:4222)"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("\n[Service]\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"));
        assert!(!text.contains("IPAddress"), "{text}");
    }

    #[test]
    fn the_system_drop_in_allows_the_servers_addresses() {
        let text = drop_in(
            Scope::System,
            &servers(&["nats://10.0.0.7:4222,tls://[2001:db8::1]:4443", "localhost"]),
            "nameserver 10.0.0.53\n",
        )
        .unwrap();
        assert!(
            text.ends_with("\nIPAddressAllow=10.0.0.7 2001:db8::1 localhost\n"),
            "addresses as given, no name server when nothing is resolved: {text}"
        );
    }

    #[test]
    fn name_servers_are_read_from_resolv_conf() {
        assert_eq!(
            name_servers(
                "# a comment\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\noptions edns0\n"
            ),
            [
                "127.0.0.53".parse::<IpAddr>().unwrap(),
                "fe80::1".parse().unwrap()
            ]
        );
        // Nothing resolved, nothing of resolv.conf allowed.
        let (allow, resolved) =
            allowed_addresses(&servers(&["localhost"]), "nameserver 10.0.0.53\n").unwrap();
        assert_eq!(allow, ["localhost"]);
        assert!(!resolved);
    }

    #[test]
    fn the_config_gets_the_servers_in_place_of_the_example_line() {
        let example = "# top\n#nats = \"tls://hub.example:4222\"\n#node = \"laptop\"\n[access]\n";
        let text = config_with(example, &servers(&["nats://a:4222", "tls://b"]));
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(
            table["nats"],
            toml::Value::Array(vec![
                toml::Value::String("nats://a:4222".into()),
                toml::Value::String("tls://b".into()),
            ])
        );
        assert!(text.contains("#node = \"laptop\"\n[access]\n"), "{text}");
        let bare = config_with("[access]\n", &servers(&["nats://a:4222"]));
        assert!(bare.parse::<toml::Table>().unwrap().contains_key("nats"));
    }

    #[test]
    fn servers_are_read_from_a_config_as_string_or_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("askbusd.toml");
        assert!(servers_in_config(&path).unwrap().is_empty());
        std::fs::write(&path, "nats = \"nats://a:1, nats://b:2\"\n").unwrap();
        assert_eq!(servers_in_config(&path).unwrap().len(), 2);
        std::fs::write(&path, "nats = [\"nats://a:1\"]\n[access]\n").unwrap();
        assert_eq!(servers_in_config(&path).unwrap()[0].port(), 1);
        std::fs::write(&path, "log_level = \"debug\"\n").unwrap();
        assert!(servers_in_config(&path).unwrap().is_empty());
    }
}
