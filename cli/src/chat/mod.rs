//! `askbus chat telegram|slack|discord`: the requests on the bus as messages in a chat the person already
//! carries, answered there, over outbound connections only (no public URL, tunnel or port).
//! It is one more UI subscriber of the bus (like `askbus notify` and `askbus ui`), so it
//! composes with every other UI under first-answer-wins: the message of a request that ends
//! elsewhere is edited to its outcome and loses its buttons.
//!
//! A subcommand, not a sink of `askbus notify`: a two-way chat has a life of its own (an
//! inbound connection to keep and resume, per-request messages to edit, who may answer,
//! a state file, a cursor) that shares nothing with notify's schedule of one-way pushes, and
//! a chat that fails must not take the desktop notifications down with it. Run it beside
//! the notifier (a user unit of its own).
//!
//! This module owns the engine: which request shows in which message, the digest a burst
//! becomes, who may tap, the integrity of every tap (`seal`), and what survives a restart
//! (`state`). `engine` is that engine (`engine/inbound` what the chat sends it: taps,
//! replies, who may answer); `card` is one request's message and buttons, `platform` the interface of a chat
//! platform, `telegram` the Telegram Bot API, `slack` Slack's Socket Mode and Web API,
//! `discord` Discord's Gateway and HTTP API.

mod card;
mod discord;
mod engine;
mod platform;
mod seal;
mod slack;
mod state;
mod telegram;
mod text;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::context::FilterArgs;
use engine::Engine;
use state::StateFile;

/// At most this many requests have a message of their own by default; more wait in one
/// digest message and get theirs as the others end.
const DEFAULT_MAX_MESSAGES: usize = 10;
/// The digest is edited at most this often.
const DIGEST_EVERY: Duration = Duration::from_secs(2);
/// The state file is written at most this often.
const SAVE_EVERY: Duration = Duration::from_millis(200);
/// How long after a reconnect the replay may take before what it did not bring is ended.
const REPLAY_GRACE: Duration = Duration::from_secs(5);
/// Lines a digest lists.
const DIGEST_LINES: usize = 10;

/// `askbus chat`'s command line.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(subcommand)]
    pub platform: PlatformArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum PlatformArgs {
    /// Telegram, by Bot API long polling: the bot's token from $ASKBUS_TELEGRAM_TOKEN or
    /// --token-file
    Telegram(TelegramArgs),
    /// Slack, by Socket Mode: the app-level token (xapp-…) from $ASKBUS_SLACK_APP_TOKEN or
    /// --app-token-file, the bot token (xoxb-…) from $ASKBUS_SLACK_BOT_TOKEN or
    /// --bot-token-file
    Slack(SlackArgs),
    /// Discord, by the Gateway: the bot token from $ASKBUS_DISCORD_TOKEN or --token-file
    Discord(DiscordArgs),
}

/// What every platform takes.
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// A chat user who may answer (the platform's user id: Telegram's and Discord's are
    /// numbers, Slack's look like U0123ABCD); repeat for several.
    /// Taps and replies of anyone else are refused and logged
    #[arg(long = "allow-user", value_name = "USER_ID", required = true)]
    pub allow_users: Vec<String>,
    /// The platform's API base URL: for tests and self-hosted gateways (e.g. a local Bot API
    /// server) only [default: the platform's public API]
    #[arg(long, value_name = "URL")]
    pub api_base: Option<String>,
    /// Where message ids and the cursor are kept across restarts (0600) [default:
    /// $XDG_STATE_HOME/askbus/chat-PLATFORM-CHAT.json]; the button key is beside it (.key)
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Post only "an agent in project P needs you" (with a link to askbus web when
    /// --web-url is given): no question text, command or option leaves the machine
    #[arg(long)]
    pub redact: bool,
    /// Where `askbus web` is reached: messages link to the request there (signed links)
    #[arg(long, value_name = "BASE_URL")]
    pub web_url: Option<String>,
    /// The key that signs those links [default: web-links.key beside the socket]
    #[arg(long, value_name = "FILE")]
    pub link_key: Option<PathBuf>,
    /// At most this many requests get a message of their own; the others wait in one digest
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_MESSAGES)]
    pub max_messages: usize,
}

#[derive(Debug, clap::Args)]
pub struct TelegramArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The chat to post in: a user's id (a private chat with the bot) or a group's
    #[arg(long, value_name = "CHAT_ID")]
    pub chat: String,
    /// A file (mode 0600) holding the bot token, when $ASKBUS_TELEGRAM_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds a getUpdates long poll waits
    #[arg(long, value_name = "SECS", default_value_t = 30, hide = true)]
    pub poll_timeout: u64,
}

#[derive(Debug, clap::Args)]
pub struct SlackArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Where to post: a channel id (C…, the app invited to it) or a user id (U…, a direct
    /// message from the app)
    #[arg(long, value_name = "CHANNEL_ID")]
    pub channel: String,
    /// A file (mode 0600) holding the app-level token, when $ASKBUS_SLACK_APP_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub app_token_file: Option<PathBuf>,
    /// A file (mode 0600) holding the bot token, when $ASKBUS_SLACK_BOT_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub bot_token_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DiscordArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The channel to post in: its id (Developer Mode on, right-click the channel, Copy
    /// Channel ID), the bot a member of its server with View Channel and Send Messages
    #[arg(long, value_name = "CHANNEL_ID")]
    pub channel: String,
    /// A file (mode 0600) holding the bot token, when $ASKBUS_DISCORD_TOKEN is not set
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

impl CommonArgs {
    /// `--api-base`, or the platform's public API.
    fn api_base(&self, default: &str) -> String {
        self.api_base.clone().unwrap_or_else(|| default.to_owned())
    }

    /// The state file (`--state`, or the default for `platform` and `chat`) and its path.
    fn state(&self, platform: &str, chat: &str) -> Result<(StateFile, PathBuf)> {
        let path = state_path(self, platform, chat)?;
        Ok((StateFile::load(&path)?, path))
    }
}

/// A token read from `env` or `file`, refused when it has characters no token has (it goes
/// into an HTTP header or a URL).
fn token(env: &str, file: Option<&Path>, flag: &str) -> Result<String> {
    let token = crate::notify::secret(env, file)?
        .with_context(|| format!("no token: set ${env} or give {flag}"))?;
    if token.is_empty()
        || !token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.'))
    {
        bail!("the token in ${env} (or {flag}) has characters a token never has");
    }
    Ok(token)
}

pub async fn run(socket: &Path, args: ChatArgs) -> Result<ExitCode> {
    let engine = match args.platform {
        PlatformArgs::Telegram(t) => {
            let token = crate::notify::secret("ASKBUS_TELEGRAM_TOKEN", t.token_file.as_deref())?
                .context("no bot token: set $ASKBUS_TELEGRAM_TOKEN or give --token-file")?;
            if !token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '_' || c == '-')
            {
                bail!("the Telegram token has characters a token never has");
            }
            if t.chat.parse::<i64>().is_err() && !t.chat.starts_with('@') {
                bail!("--chat takes a numeric chat id (or @channelname)");
            }
            let (state, state_path) = t.common.state("telegram", &t.chat)?;
            let cfg = telegram::Config {
                api_base: t.common.api_base(telegram::DEFAULT_API_BASE),
                token,
                chat: t.chat.clone(),
                poll_secs: t.poll_timeout,
                cursor: state.saved.cursor,
            };
            let (out, rx) = telegram::spawn(cfg);
            Engine::new(socket, "telegram", t.common, state, &state_path, out, rx)?
        }
        PlatformArgs::Slack(s) => {
            let app_token = token(
                "ASKBUS_SLACK_APP_TOKEN",
                s.app_token_file.as_deref(),
                "--app-token-file",
            )?;
            let bot_token = token(
                "ASKBUS_SLACK_BOT_TOKEN",
                s.bot_token_file.as_deref(),
                "--bot-token-file",
            )?;
            if !app_token.starts_with("xapp-") {
                bail!(
                    "the app-level token starts with xapp- (Basic Information, App-Level Tokens)"
                );
            }
            if !bot_token.starts_with("xoxb-") {
                bail!("the bot token starts with xoxb- (OAuth & Permissions)");
            }
            if s.channel.is_empty() || !s.channel.chars().all(|c| c.is_ascii_alphanumeric()) {
                bail!("--channel takes a channel or user id (C0123ABCD, U0123ABCD)");
            }
            let (state, state_path) = s.common.state("slack", &s.channel)?;
            let cfg = slack::Config {
                api_base: s.common.api_base(slack::DEFAULT_API_BASE),
                app_token,
                bot_token,
                channel: s.channel.clone(),
            };
            let (out, rx) = slack::spawn(cfg);
            Engine::new(socket, "slack", s.common, state, &state_path, out, rx)?
        }
        PlatformArgs::Discord(d) => {
            let token = token(
                "ASKBUS_DISCORD_TOKEN",
                d.token_file.as_deref(),
                "--token-file",
            )?;
            if d.channel.is_empty() || !d.channel.chars().all(|c| c.is_ascii_digit()) {
                bail!("--channel takes a channel id (a number: Copy Channel ID in Discord)");
            }
            if let Some(u) = d
                .common
                .allow_users
                .iter()
                .find(|u| u.is_empty() || !u.chars().all(|c| c.is_ascii_digit()))
            {
                bail!(
                    "--allow-user takes Discord user ids (numbers: Copy User ID), not {}",
                    crate::term::sanitize(u)
                );
            }
            let (state, state_path) = d.common.state("discord", &d.channel)?;
            let cfg = discord::Config {
                api_base: d.common.api_base(discord::DEFAULT_API_BASE),
                token,
                channel: d.channel.clone(),
            };
            let (out, rx) = discord::spawn(cfg);
            Engine::new(socket, "discord", d.common, state, &state_path, out, rx)?
        }
    };
    let mut term_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int_sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut engine = engine;
    let result = tokio::select! {
        r = engine.run(socket) => r,
        _ = term_sig.recv() => Ok(ExitCode::SUCCESS),
        _ = int_sig.recv() => Ok(ExitCode::SUCCESS),
    };
    if let Err(e) = engine.state.save() {
        eprintln!("askbus chat: {e:#}");
    }
    result
}

fn state_path(common: &CommonArgs, platform: &str, chat: &str) -> Result<PathBuf> {
    if let Some(p) = &common.state {
        return Ok(p.clone());
    }
    let dir = state::default_dir().context("no $HOME: give --state")?;
    let chat: String = chat
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok(dir.join(format!("chat-{platform}-{chat}.json")))
}
