//! Discord's HTTP API as askbus chat calls it: the bot token in the `Authorization` header
//! only (never a URL, a log line or an error), per-route rate limits learnt from the
//! `X-RateLimit-*` headers (a route whose bucket is spent waits for its reset before it is
//! called again, and routes that share an `X-RateLimit-Bucket` share the wait), the global
//! limit (a 429 with `global` stops every call until it is over), and a 429's `retry_after`
//! (seconds, a float) waited out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;
use tokio::time::Instant;

use crate::chat::platform::Failure;

#[derive(Default)]
struct Limits {
    /// Route (method and path with its top-level resource) → its bucket's id, once known.
    bucket_of: HashMap<String, String>,
    /// Bucket id (or the route, before a bucket is known) → when it may be called again.
    until: HashMap<String, Instant>,
    /// A global 429: nothing is called before then.
    global: Option<Instant>,
}

#[derive(Clone)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
    auth: String,
    limits: Arc<Mutex<Limits>>,
}

impl Rest {
    pub fn new(base: &str, token: &str) -> Rest {
        Rest {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                // Discord asks bots to say who they are in this form.
                .user_agent(concat!(
                    "DiscordBot (https://github.com/askbus/askbus, ",
                    env!("CARGO_PKG_VERSION"),
                    ")"
                ))
                .build()
                .expect("the HTTP client builds (rustls with bundled roots)"),
            base: base.trim_end_matches('/').to_owned(),
            auth: format!("Bot {token}"),
            limits: Arc::default(),
        }
    }

    fn limits(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits
            .lock()
            .expect("the limits lock is never poisoned")
    }

    /// How long `route` must wait before it may be called (interaction callbacks, `bot`
    /// false, are not bound by the global limit).
    fn wait(&self, route: &str, bot: bool) -> Duration {
        let l = self.limits();
        let now = Instant::now();
        let key = l.bucket_of.get(route).map_or(route, String::as_str);
        [l.global.filter(|_| bot), l.until.get(key).copied()]
            .into_iter()
            .flatten()
            .map(|t| t.saturating_duration_since(now))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Learns `route`'s bucket from a response's headers.
    fn learn(&self, route: &str, h: &HeaderMap) {
        let header = |k: &str| h.get(k).and_then(|v| v.to_str().ok());
        let mut l = self.limits();
        let key = match header("x-ratelimit-bucket") {
            Some(b) => {
                l.bucket_of.insert(route.to_owned(), b.to_owned());
                b.to_owned()
            }
            None => route.to_owned(),
        };
        let remaining = header("x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok());
        let reset_after = header("x-ratelimit-reset-after").and_then(|v| v.parse::<f64>().ok());
        match (remaining, reset_after) {
            (Some(0), Some(secs)) if secs.is_finite() && secs > 0.0 => {
                l.until.insert(
                    key,
                    Instant::now() + Duration::from_secs_f64(secs.min(3600.0)),
                );
            }
            _ => {
                l.until.remove(&key);
            }
        }
    }

    /// One call. `route` names it for the rate limits and the log (`POST /channels/{id}/messages`:
    /// never the URL, which for interactions holds a token); `bot` sends the bot token.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        route: &str,
        body: Option<&Value>,
        bot: bool,
    ) -> Result<Value, Failure> {
        let wait = self.wait(route, bot);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if bot {
            req = req.header("authorization", &self.auth);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| Failure::Transient(format!("{route}: {}", e.without_url())))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        self.learn(route, &headers);
        let text = resp.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(v);
        }
        if status.as_u16() == 429 {
            let secs = v
                .get("retry_after")
                .and_then(Value::as_f64)
                .or_else(|| {
                    headers
                        .get("retry-after")
                        .and_then(|h| h.to_str().ok())
                        .and_then(|h| h.trim().parse::<f64>().ok())
                })
                .filter(|s| s.is_finite() && *s >= 0.0)
                .unwrap_or(1.0)
                .min(3600.0);
            let d = Duration::from_secs_f64(secs);
            let global = v.get("global") == Some(&Value::Bool(true))
                || headers.get("x-ratelimit-global").is_some();
            let mut l = self.limits();
            let until = Instant::now() + d;
            if global {
                l.global = Some(until);
            } else {
                let key = l.bucket_of.get(route).cloned().unwrap_or(route.to_owned());
                l.until.insert(key, until);
            }
            return Err(Failure::RetryAfter(d));
        }
        let message = v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        let code = v.get("code").and_then(Value::as_u64).unwrap_or(0);
        let msg = format!("{route}: HTTP {status}: {message} ({code})");
        Err(match status.as_u16() {
            401 => Failure::Unauthorized(msg),
            500..=599 => Failure::Transient(msg),
            _ => Failure::Refused(msg),
        })
    }
}
