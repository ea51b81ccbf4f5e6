//! Who may use `askbus web`: one-time sign-in codes, the sessions they open, the Host
//! allowlist (against DNS rebinding) and the Origin check (against cross-site WebSocket
//! hijacking). `Policy::site` is applied by a middleware to every request before any route
//! runs, so no route can forget it; `Sessions::session` guards the page's own routes.
//!
//! Why codes and sessions rather than one token: the token used to be a long-lived secret on
//! xdg-open's command line (readable by every local user in /proc/PID/cmdline) and in a
//! cookie the browser also sent to every other server on 127.0.0.1 (cookies ignore ports).
//! Now the link carries a code that dies at its first use or after a few minutes; using it
//! sets a session cookie whose Path is a per-server random directory (`/<sid>/`), so the
//! browser sends it to this server's page only, never to another port's server; and sessions
//! end when signed out (one, or all at once) or when `askbus web` stops.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

/// Random bytes in a code and in a session: beyond guessing at any request rate.
const SECRET_BYTES: usize = 24;
/// Random bytes in the per-server path.
const SID_BYTES: usize = 12;
/// Codes not yet used are kept up to this many (the oldest go first): a person asks for one
/// at a time, and a stuck key cannot grow the table.
const MAX_CODES: usize = 16;
/// Sessions kept at most; signing in past this ends the oldest.
const MAX_SESSIONS: usize = 256;

/// A random secret as lower-case hex.
fn random_hex(n: usize) -> Result<String, getrandom::Error> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Secrets are stored and looked up by their SHA-256, so neither a lookup's timing nor a
/// memory dump gives a usable one away.
fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Why a code does not sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("this sign-in link was already used, or is not one of this askbus web's")]
    Unknown,
    #[error("this sign-in link has expired")]
    Expired,
}

/// A signed-in browser.
#[derive(Debug)]
pub struct Session {
    /// Cancelled when the session is signed out: its WebSockets close at once.
    pub revoked: CancellationToken,
    opened: Instant,
}

#[derive(Default)]
struct State {
    /// Code digest → when it expires.
    codes: HashMap<[u8; 32], Instant>,
    /// Session digest → session.
    sessions: HashMap<[u8; 32], Arc<Session>>,
}

/// The codes and sessions of one `askbus web` process.
pub struct Sessions {
    /// The random directory the page lives under, new at every start.
    sid: String,
    /// Carries the port too, so two servers' cookies never overwrite each other.
    cookie_name: String,
    code_ttl: Duration,
    state: Mutex<State>,
}

impl Sessions {
    pub fn new(port: u16, code_ttl: Duration) -> Result<Sessions, getrandom::Error> {
        let sid = random_hex(SID_BYTES)?;
        // The name tells this server's cookie from another's; it gives away none of the sid.
        let tag = random_hex(4)?;
        Ok(Sessions {
            cookie_name: format!("askbus-web-{port}-{tag}"),
            sid,
            code_ttl,
            state: Mutex::new(State::default()),
        })
    }

    /// The page's directory: `/<sid>/`.
    pub fn sid(&self) -> &str {
        &self.sid
    }

    pub fn code_ttl(&self) -> Duration {
        self.code_ttl
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves plain data: keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh one-time code, valid for the code TTL.
    pub fn new_code(&self) -> Result<String, getrandom::Error> {
        let code = random_hex(SECRET_BYTES)?;
        let now = Instant::now();
        let mut st = self.state();
        st.codes.retain(|_, exp| *exp > now);
        while st.codes.len() >= MAX_CODES {
            let oldest = *st
                .codes
                .iter()
                .min_by_key(|(_, exp)| **exp)
                .expect("not empty")
                .0;
            st.codes.remove(&oldest);
        }
        st.codes.insert(digest(&code), now + self.code_ttl);
        Ok(code)
    }

    /// Whether `code` would sign in now, without using it up.
    pub fn check_code(&self, code: &str) -> Result<(), CodeError> {
        match self.state().codes.get(&digest(code)) {
            None => Err(CodeError::Unknown),
            Some(exp) if *exp <= Instant::now() => Err(CodeError::Expired),
            Some(_) => Ok(()),
        }
    }

    /// Uses `code` up (whether or not it was still valid) and opens a session: its cookie
    /// value.
    pub fn redeem(&self, code: &str) -> Result<String, CodeError> {
        let now = Instant::now();
        let mut st = self.state();
        let exp = st.codes.remove(&digest(code)).ok_or(CodeError::Unknown)?;
        if exp <= now {
            return Err(CodeError::Expired);
        }
        let secret = random_hex(SECRET_BYTES).map_err(|_| CodeError::Unknown)?;
        if st.sessions.len() >= MAX_SESSIONS {
            let oldest = *st
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .expect("not empty")
                .0;
            if let Some(s) = st.sessions.remove(&oldest) {
                s.revoked.cancel();
            }
        }
        st.sessions.insert(
            digest(&secret),
            Arc::new(Session {
                revoked: CancellationToken::new(),
                opened: now,
            }),
        );
        Ok(secret)
    }

    /// The session the request's cookie names, if it is open.
    pub fn session(&self, headers: &HeaderMap) -> Option<(String, Arc<Session>)> {
        let st = self.state();
        cookies(headers, &self.cookie_name).find_map(|value| {
            st.sessions
                .get(&digest(value))
                .map(|s| (value.to_owned(), s.clone()))
        })
    }

    /// Signs one session out.
    pub fn revoke(&self, secret: &str) {
        if let Some(s) = self.state().sessions.remove(&digest(secret)) {
            s.revoked.cancel();
        }
    }

    /// Signs every session out and forgets every unused code; returns how many sessions
    /// there were.
    pub fn revoke_all(&self) -> usize {
        let mut st = self.state();
        st.codes.clear();
        let n = st.sessions.len();
        for (_, s) in st.sessions.drain() {
            s.revoked.cancel();
        }
        n
    }

    /// The `Set-Cookie` value a sign-in answers with. No `Path`: the browser scopes the cookie
    /// to the directory of the sign-in URL, `/<sid>/` (under whatever prefix a reverse proxy
    /// adds), so it is never sent to another server on this host, whatever its port.
    /// HttpOnly: page scripts never see it. SameSite=Strict: other sites' pages cannot make
    /// the browser send it. Secure behind a TLS proxy.
    pub fn login_cookie(&self, secret: &str, headers: &HeaderMap) -> String {
        format!(
            "{}={secret}; HttpOnly; SameSite=Strict{}",
            self.cookie_name,
            if behind_tls(headers) { "; Secure" } else { "" }
        )
    }

    /// The `Set-Cookie` value that removes the cookie (sign out).
    pub fn logout_cookie(&self, headers: &HeaderMap) -> String {
        format!(
            "{}=; Max-Age=0; HttpOnly; SameSite=Strict{}",
            self.cookie_name,
            if behind_tls(headers) { "; Secure" } else { "" }
        )
    }
}

fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

/// The values of the cookies named `name`.
fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// An origin given with `--origin`, e.g. a TLS reverse proxy's public address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraOrigin {
    /// `scheme://host[:port]`, lower-case, as browsers send it in `Origin`.
    origin: String,
    /// `host[:port]`, as the proxy may pass it on in `Host`.
    host: String,
}

/// Parses `--origin https://askbus.example.com` (a trailing `/` is allowed; a path is not).
pub fn parse_origin(s: &str) -> Result<ExtraOrigin, String> {
    let lower = s.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((scheme, host)) = lower.split_once("://") else {
        return Err(format!("--origin {s:?}: expected scheme://host[:port]"));
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!("--origin {s:?}: the scheme must be http or https"));
    }
    if host.is_empty() || host.contains(['/', '?', '#', '@']) || host.contains(char::is_whitespace)
    {
        return Err(format!(
            "--origin {s:?}: expected scheme://host[:port], without a path"
        ));
    }
    Ok(ExtraOrigin {
        host: host.to_owned(),
        origin: lower,
    })
}

/// The site rules of one `askbus web` process: which Host and Origin a request may carry.
pub struct Policy {
    /// `--allow-remote`: the page may be reached under any name or address.
    any_host: bool,
    extra: Vec<ExtraOrigin>,
}

impl Policy {
    pub fn new(any_host: bool, extra: Vec<ExtraOrigin>) -> Policy {
        Policy { any_host, extra }
    }

    /// Refuses a foreign Host or Origin (403), before anything else about the request is
    /// looked at. Every route passes here, signed links included.
    pub fn site(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        let Some(host) = header_str(headers, header::HOST) else {
            return Err("the request has no Host header");
        };
        let host = host.to_ascii_lowercase();
        if !self.host_allowed(&host) {
            return Err("this server does not answer to that Host name");
        }
        if let Some(origin) = header_str(headers, header::ORIGIN) {
            if !self.origin_allowed(&origin.to_ascii_lowercase(), &host) {
                return Err("requests from other sites are refused");
            }
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.any_host || is_loopback_host(host) || self.extra.iter().any(|e| e.host == host)
    }

    /// Same-origin (the Origin names the Host the request came to, under http, or https
    /// behind a TLS proxy that keeps the Host), or an origin given with `--origin`.
    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let same = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|h| h == host);
        same || self.extra.iter().any(|e| e.origin == origin)
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The value of `name=` in a query string, percent-decoded.
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

/// Percent-decodes (and reads `+` as a space, as forms write it); invalid escapes are kept
/// as they are.
fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a query value or a
/// fragment.
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Whether a Host header names this machine's loopback: `localhost`, 127.0.0.0/8 or `[::1]`,
/// on any port (an SSH tunnel may forward another port to this one). A DNS-rebinding page
/// arrives under its own domain name, which is refused.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || is_port(tail) => {
                return v6.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
            }
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `:` then 1 to 5 digits.
fn is_port(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy(any_host: bool, extra: &[&str]) -> Policy {
        let extra = extra.iter().map(|o| parse_origin(o).unwrap()).collect();
        Policy::new(any_host, extra)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_code_signs_in_once_and_sessions_are_revocable() {
        let s = Sessions::new(7870, Duration::from_secs(600)).unwrap();
        assert_eq!(s.sid().len(), 24);
        let code = s.new_code().unwrap();
        assert_eq!(code.len(), 48);
        let secret = s.redeem(&code).unwrap();
        assert_eq!(s.redeem(&code), Err(CodeError::Unknown));
        assert_eq!(s.redeem("0"), Err(CodeError::Unknown));
        let name = s.cookie_name.clone();
        let with = |v: &str| headers(&[("cookie", &format!("a=b; {name}={v}"))]);
        let (found, session) = s.session(&with(&secret)).unwrap();
        assert_eq!(found, secret);
        assert!(s.session(&with("nope")).is_none());
        // Another server's cookie of the same value and another name is not this one's.
        assert!(s
            .session(&headers(&[(
                "cookie",
                &format!("askbus-web-7871-x={secret}")
            )]))
            .is_none());
        s.revoke(&secret);
        assert!(session.revoked.is_cancelled());
        assert!(s.session(&with(&secret)).is_none());

        let a = s.redeem(&s.new_code().unwrap()).unwrap();
        let b = s.redeem(&s.new_code().unwrap()).unwrap();
        let unused = s.new_code().unwrap();
        assert_eq!(s.revoke_all(), 2);
        assert!(s.session(&with(&a)).is_none() && s.session(&with(&b)).is_none());
        assert_eq!(s.redeem(&unused), Err(CodeError::Unknown));
    }

    #[test]
    fn an_expired_code_is_refused_and_old_codes_make_room() {
        let s = Sessions::new(7870, Duration::ZERO).unwrap();
        let code = s.new_code().unwrap();
        assert_eq!(s.redeem(&code), Err(CodeError::Expired));
        let s = Sessions::new(7870, Duration::from_secs(600)).unwrap();
        let first = s.new_code().unwrap();
        for _ in 0..MAX_CODES {
            s.new_code().unwrap();
        }
        assert_eq!(s.state().codes.len(), MAX_CODES);
        assert_eq!(s.redeem(&first), Err(CodeError::Unknown));
    }

    #[test]
    fn cookies_are_scoped_to_the_page_directory() {
        let s = Sessions::new(7870, Duration::from_secs(600)).unwrap();
        let c = s.login_cookie("v", &HeaderMap::new());
        assert!(c.starts_with("askbus-web-7870-"), "{c}");
        assert!(c.ends_with("=v; HttpOnly; SameSite=Strict"), "{c}");
        assert!(!c.contains("Path"), "{c}");
        let tls = headers(&[("x-forwarded-proto", "https")]);
        assert!(s.login_cookie("v", &tls).ends_with("; Secure"));
        assert!(s.logout_cookie(&tls).contains("=; Max-Age=0;"));
    }

    #[test]
    fn foreign_hosts_are_refused_unless_remote_is_allowed() {
        let p = policy(false, &[]);
        for host in [
            "127.0.0.1:7870",
            "127.0.0.1:9000",
            "127.1.2.3:7870",
            "localhost:7870",
            "LOCALHOST",
            "[::1]:7870",
            "[::1]",
        ] {
            assert_eq!(p.site(&headers(&[("host", host)])), Ok(()), "{host}");
        }
        for host in [
            "evil.example:7870",
            "localhost.evil.example",
            "127.0.0.1.evil.example:7870",
            "192.168.1.5:7870",
            "[::2]:7870",
            "127.0.0.1:x",
            "[::1]x",
        ] {
            assert!(p.site(&headers(&[("host", host)])).is_err(), "{host}");
        }
        assert!(p.site(&HeaderMap::new()).is_err());
        let remote = policy(true, &[]);
        assert_eq!(
            remote.site(&headers(&[("host", "192.168.1.5:7870")])),
            Ok(())
        );
    }

    #[test]
    fn only_same_origin_or_listed_origins_pass() {
        let p = policy(false, &["https://askbus.example.com/"]);
        let with =
            |origin: &str, host: &str| p.site(&headers(&[("host", host), ("origin", origin)]));
        let host = "127.0.0.1:7870";
        assert_eq!(with("http://127.0.0.1:7870", host), Ok(()));
        assert_eq!(with("https://askbus.example.com", host), Ok(()));
        // A proxy that keeps the public Host.
        assert_eq!(
            with("https://askbus.example.com", "askbus.example.com"),
            Ok(())
        );
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:7871",
            "http://localhost:7870",
            "null",
            "https://askbus.example.com.evil.example",
        ] {
            assert!(with(bad, host).is_err(), "{bad}");
        }
    }

    #[test]
    fn origins_parse_strictly() {
        assert!(parse_origin("https://a.example:8443").is_ok());
        assert!(parse_origin("a.example").is_err());
        assert!(parse_origin("ftp://a.example").is_err());
        assert!(parse_origin("https://a.example/path").is_err());
        assert!(parse_origin("https://").is_err());
    }

    #[test]
    fn query_values_are_decoded_and_encoded() {
        assert_eq!(
            query_param(Some("a=1&code=x%2Fy+z"), "code").as_deref(),
            Some("x/y z")
        );
        assert_eq!(query_param(Some("code"), "code"), None);
        assert_eq!(query_param(None, "code"), None);
        assert_eq!(
            query_param(Some("q=%E2%9C%93%"), "q").as_deref(),
            Some("✓%")
        );
        assert_eq!(query_param(Some("q=%zz%e"), "q").as_deref(), Some("%zz%e"));
        assert_eq!(percent_encode("a b/✓-_.~"), "a%20b%2F%E2%9C%93-_.~");
    }
}
