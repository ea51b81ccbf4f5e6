//! `askbus notify`'s settings: the command line over the `[notify]` section of a TOML file
//! (default `$XDG_CONFIG_HOME/askbus/notify.toml`). Secrets (access tokens, Slack's webhook
//! URL) come only from a file or an environment variable, never from the command line, where
//! every user on the machine could read them in `ps`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::push::{Retry, Target};

/// The file's shape: everything under `[notify]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    notify: Section,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Section {
    pub desktop: Option<bool>,
    pub after: Option<String>,
    pub push_after: Option<String>,
    pub remind: Option<String>,
    pub redact: Option<bool>,
    pub web_url: Option<String>,
    pub link_key: Option<PathBuf>,
    pub ntfy: Option<NtfySection>,
    pub webhook: Option<WebhookSection>,
    pub slack: Option<SlackSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NtfySection {
    pub topic_url: String,
    pub token_file: Option<PathBuf>,
    pub priority: Option<u8>,
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WebhookSection {
    pub url: String,
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SlackSection {
    /// A file holding the webhook URL (the URL is the secret).
    pub url_file: PathBuf,
}

/// The default config file, read when it exists.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("askbus").join("notify.toml"))
}

/// Reads `[notify]` from `path` (must exist), or from the default file when it exists.
pub fn load(path: Option<&Path>) -> Result<Section> {
    let (path, required) = match path {
        Some(p) => (p.to_owned(), true),
        None => match default_path() {
            Some(p) => (p, false),
            None => return Ok(Section::default()),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Section::default())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let file: File =
        toml::from_str(&text).with_context(|| format!("{} is not valid", path.display()))?;
    Ok(file.notify)
}

/// A duration as people write them ("30s", "5m", "0").
pub fn duration(s: &str) -> Result<Duration> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s.trim())
        .with_context(|| format!("{s:?} is not a duration (e.g. 30s, 5m, 1h)"))
}

/// A secret: the environment variable `env`, else the file. A file others can read is
/// refused (a token there is no secret).
pub fn secret(env: &str, file: Option<&Path>) -> Result<Option<String>> {
    if let Some(v) = std::env::var_os(env).filter(|v| !v.is_empty()) {
        return Ok(Some(v.to_string_lossy().trim().to_owned()));
    }
    let Some(file) = file else { return Ok(None) };
    let meta =
        std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?;
    if meta.mode() & 0o077 != 0 {
        bail!(
            "{} is readable by others (mode {:o}): `chmod 600 {}` first",
            file.display(),
            meta.mode() & 0o777,
            file.display()
        );
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let text = text.trim();
    if text.is_empty() {
        bail!("{} is empty", file.display());
    }
    Ok(Some(text.to_owned()))
}

/// The push targets the command line and the file name.
pub fn targets(
    section: &Section,
    ntfy_flag: Option<&str>,
    webhook_flag: Option<&str>,
    priority_flag: Option<u8>,
) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let ntfy_url = ntfy_flag.or(section.ntfy.as_ref().map(|n| n.topic_url.as_str()));
    if let Some(url) = ntfy_url {
        if super::push::split_topic(url).is_none() {
            bail!("--ntfy {url:?}: give the topic's URL, like https://ntfy.sh/TOPIC");
        }
        let n = section.ntfy.as_ref();
        let priority = priority_flag.or(n.and_then(|n| n.priority)).unwrap_or(4);
        if !(1..=5).contains(&priority) {
            bail!("the ntfy priority is 1 (min) to 5 (max), not {priority}");
        }
        out.push(Target::Ntfy {
            topic_url: url.to_owned(),
            token: secret("ASKBUS_NTFY_TOKEN", n.and_then(|n| n.token_file.as_deref()))?,
            priority,
            tags: n
                .and_then(|n| n.tags.clone())
                .unwrap_or_else(|| vec!["robot".into()]),
        });
    }
    let webhook_url = webhook_flag.or(section.webhook.as_ref().map(|w| w.url.as_str()));
    if let Some(url) = webhook_url {
        check_http(url, "the webhook URL")?;
        out.push(Target::Webhook {
            url: url.to_owned(),
            token: secret(
                "ASKBUS_WEBHOOK_TOKEN",
                section
                    .webhook
                    .as_ref()
                    .and_then(|w| w.token_file.as_deref()),
            )?,
        });
    }
    let slack = secret(
        "ASKBUS_SLACK_WEBHOOK",
        section.slack.as_ref().map(|s| s.url_file.as_path()),
    )?;
    if let Some(url) = slack {
        check_http(&url, "the Slack webhook URL")?;
        out.push(Target::Slack { url });
    }
    Ok(out)
}

fn check_http(url: &str, what: &str) -> Result<()> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        bail!("{what} must start with https:// (or http://)");
    }
    Ok(())
}

/// The retry policy; `ASKBUS_NOTIFY_RETRY_MS` shortens the first wait (tests).
pub fn retry() -> Retry {
    let mut r = Retry::default();
    if let Some(ms) = std::env::var("ASKBUS_NOTIFY_RETRY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        r.initial = Duration::from_millis(ms);
        r.max = Duration::from_millis(ms * 8);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_section() {
        let f: File = toml::from_str(
            "[notify]\nafter = \"5s\"\nredact = true\n[notify.ntfy]\ntopic-url = \"https://ntfy.sh/x\"\npriority = 5\n",
        )
        .unwrap();
        assert_eq!(f.notify.after.as_deref(), Some("5s"));
        assert_eq!(f.notify.ntfy.unwrap().priority, Some(5));
        assert!(toml::from_str::<File>("[notify]\ntoken = \"x\"\n").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("0").unwrap(), Duration::ZERO);
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert!(duration("soon").is_err());
    }

    #[test]
    fn secrets_refuse_open_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "tok\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(secret("ASKBUS_TEST_UNSET_VAR", Some(&p)).is_err());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            secret("ASKBUS_TEST_UNSET_VAR", Some(&p))
                .unwrap()
                .as_deref(),
            Some("tok")
        );
    }
}
