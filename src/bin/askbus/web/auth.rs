//! Who may use `askbus web`: the access token (fresh from the OS's randomness at every start),
//! the Host allowlist (against DNS rebinding) and the Origin check (against cross-site
//! WebSocket hijacking). `Policy::check` is the one decision, applied by a middleware to every
//! request before any route runs, so no route can forget it.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::{header, HeaderMap, Method, Uri};

/// Random bytes in a token: 192 bits, beyond guessing at any request rate.
const TOKEN_BYTES: usize = 24;

/// The access token.
pub struct Token(String);

impl Token {
    pub fn generate() -> Result<Token, getrandom::Error> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the strings differ, so response timing says
    /// nothing about how much of a guess was right.
    fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
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

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// The request carries the token in its query: set the cookie and send the browser to
    /// this `Location`, so the token leaves the address bar and the history.
    Login {
        location: String,
    },
    /// 403: a foreign Host or Origin. Said before the token is even looked at.
    Forbidden(&'static str),
    /// 401: no valid token.
    Unauthorized,
}

/// The access rules of one `askbus web` process.
pub struct Policy {
    token: Token,
    /// Cookies are not scoped by port, so two instances on one host need distinct names.
    cookie_name: String,
    /// `--allow-remote`: the page may be reached under any name or address.
    any_host: bool,
    extra: Vec<ExtraOrigin>,
}

impl Policy {
    pub fn new(token: Token, port: u16, any_host: bool, extra: Vec<ExtraOrigin>) -> Policy {
        Policy {
            token,
            cookie_name: format!("askbus-web-{port}"),
            any_host,
            extra,
        }
    }

    pub fn token(&self) -> &Token {
        &self.token
    }

    /// The `Set-Cookie` value a login answers with. HttpOnly: page scripts never see the
    /// token. SameSite=Strict: other sites' pages cannot make the browser send it.
    pub fn login_cookie(&self, headers: &HeaderMap) -> String {
        let behind_tls = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("https"));
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict{}",
            self.cookie_name,
            self.token.as_str(),
            if behind_tls { "; Secure" } else { "" }
        )
    }

    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
        let Some(host) = header_str(headers, header::HOST) else {
            return Verdict::Forbidden("the request has no Host header");
        };
        let host = host.to_ascii_lowercase();
        if !self.host_allowed(&host) {
            return Verdict::Forbidden("this server does not answer to that Host name");
        }
        if let Some(origin) = header_str(headers, header::ORIGIN) {
            if !self.origin_allowed(&origin.to_ascii_lowercase(), &host) {
                return Verdict::Forbidden("requests from other sites are refused");
            }
        }
        if self.has_token_header(headers) {
            return Verdict::Allow;
        }
        match query_token(uri) {
            Some(t) if self.token.matches(t) => {
                // Only a page load is turned into a login; a script's WebSocket may carry the
                // token in its query, since it cannot set headers.
                if method == Method::GET && uri.path() != "/ws" {
                    Verdict::Login {
                        location: relative_self(uri.path()),
                    }
                } else {
                    Verdict::Allow
                }
            }
            _ => Verdict::Unauthorized,
        }
    }

    fn has_token_header(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|t| self.token.matches(t.trim()));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == self.cookie_name && self.token.matches(value));
        bearer || cookie
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

/// The value of `token=` in the query, if any.
fn query_token(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
}

/// A `Location` naming the same page without the query, relative so that a reverse proxy that
/// serves the page under a path prefix keeps it.
fn relative_self(path: &str) -> String {
    match path.rsplit('/').next() {
        Some(last) if !last.is_empty() => format!("./{last}"),
        _ => "./".to_owned(),
    }
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
        Policy::new(Token("secret".into()), 7870, any_host, extra)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn check(p: &Policy, uri: &str, pairs: &[(&'static str, &str)]) -> Verdict {
        p.check(&Method::GET, &uri.parse().unwrap(), &headers(pairs))
    }

    #[test]
    fn tokens_are_random_hex_of_192_bits() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 48);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..47]));
        assert!(!a.matches(""));
    }

    #[test]
    fn the_token_is_needed_by_cookie_bearer_or_query() {
        let p = policy(false, &[]);
        let host = ("host", "127.0.0.1:7870");
        assert_eq!(check(&p, "/", &[host]), Verdict::Unauthorized);
        assert_eq!(check(&p, "/?token=wrong", &[host]), Verdict::Unauthorized);
        assert_eq!(
            check(&p, "/?token=secret", &[host]),
            Verdict::Login {
                location: "./".into()
            }
        );
        assert_eq!(check(&p, "/ws?token=secret", &[host]), Verdict::Allow);
        assert_eq!(
            check(&p, "/", &[host, ("cookie", "a=b; askbus-web-7870=secret")]),
            Verdict::Allow
        );
        // Another instance's cookie (other port) does not open this one.
        assert_eq!(
            check(&p, "/", &[host, ("cookie", "askbus-web-7871=secret")]),
            Verdict::Unauthorized
        );
        assert_eq!(
            check(&p, "/", &[host, ("authorization", "Bearer secret")]),
            Verdict::Allow
        );
        assert_eq!(
            check(&p, "/", &[host, ("authorization", "Bearer secreT")]),
            Verdict::Unauthorized
        );
    }

    #[test]
    fn foreign_hosts_are_refused_unless_remote_is_allowed() {
        let p = policy(false, &[]);
        let ok = ("cookie", "askbus-web-7870=secret");
        for host in [
            "127.0.0.1:7870",
            "127.0.0.1:9000",
            "127.1.2.3:7870",
            "localhost:7870",
            "LOCALHOST",
            "[::1]:7870",
            "[::1]",
        ] {
            assert_eq!(
                check(&p, "/", &[("host", host), ok]),
                Verdict::Allow,
                "{host}"
            );
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
            assert!(
                matches!(check(&p, "/", &[("host", host), ok]), Verdict::Forbidden(_)),
                "{host}"
            );
        }
        assert!(matches!(check(&p, "/", &[ok]), Verdict::Forbidden(_)));
        let remote = policy(true, &[]);
        assert_eq!(
            check(&remote, "/", &[("host", "192.168.1.5:7870"), ok]),
            Verdict::Allow
        );
    }

    #[test]
    fn only_same_origin_or_listed_origins_pass() {
        let p = policy(false, &["https://askbus.example.com/"]);
        let host = ("host", "127.0.0.1:7870");
        let ok = ("cookie", "askbus-web-7870=secret");
        let with = |origin: &str, host: (&'static str, &str)| {
            p.check(
                &Method::GET,
                &"/ws".parse().unwrap(),
                &headers(&[host, ok, ("origin", origin)]),
            )
        };
        assert_eq!(with("http://127.0.0.1:7870", host), Verdict::Allow);
        assert_eq!(with("https://askbus.example.com", host), Verdict::Allow);
        // A proxy that keeps the public Host.
        assert_eq!(
            with("https://askbus.example.com", ("host", "askbus.example.com")),
            Verdict::Allow
        );
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:7871",
            "http://localhost:7870",
            "null",
            "https://askbus.example.com.evil.example",
        ] {
            assert!(matches!(with(bad, host), Verdict::Forbidden(_)), "{bad}");
        }
        // The Origin is checked before the token: a foreign page learns nothing either way.
        assert!(matches!(
            check(
                &p,
                "/?token=secret",
                &[host, ("origin", "http://evil.example")]
            ),
            Verdict::Forbidden(_)
        ));
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
    fn login_cookie_and_location() {
        let p = policy(false, &[]);
        let c = p.login_cookie(&HeaderMap::new());
        assert_eq!(
            c,
            "askbus-web-7870=secret; Path=/; HttpOnly; SameSite=Strict"
        );
        let tls = headers(&[("x-forwarded-proto", "https")]);
        assert!(p.login_cookie(&tls).ends_with("; Secure"));
        assert_eq!(relative_self("/"), "./");
        assert_eq!(relative_self("/askbus/"), "./");
        assert_eq!(relative_self("/index.html"), "./index.html");
    }
}
