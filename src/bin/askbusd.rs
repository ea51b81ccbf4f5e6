//! askbusd: the askbus daemon. Reads the config file under the command line, sets up
//! logging, takes the socket (inherited from systemd or its own), and serves until SIGTERM or
//! SIGINT, reloading the config file on SIGHUP; tells systemd how it is doing throughout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
// Targets rather than EnvFilter: a daemon's log filter is levels per module, and EnvFilter's
// span and field matching would link a regex engine for it (BENCHMARKS.md, "Build weight").
use tracing_subscriber::filter::Targets;

use askbusd::config::DaemonConfig;
use askbusd::config::{self, LogFormat, Options, Settings, Telemetry};
use askbusd::paths::effective_uid;
use askbusd::server::{Control, Daemon};
use askbusd::systemd;

/// Brokers ask-user questions between agent processes and UI frontends over a Unix socket.
#[derive(Debug, Parser)]
#[command(
    name = "askbusd",
    version,
    about,
    long_about = None,
    after_help = "Every option is also a key of the config file (--max-pending is max_pending), \
                  which also holds the [access] rules; an option given here wins over the file. \
                  SIGHUP reloads the file."
)]
struct Args {
    /// Check approvals against the policy rules before a person is asked: `on` (the default)
    /// or `off`. The rules are Gemini CLI's policy TOML: the shipped defaults, root-owned
    /// files in --policy-admin-dir, and each user's $XDG_CONFIG_HOME/askbus/policies
    #[arg(long, value_name = "on|off", env = "ASKBUS_POLICIES", default_value = "on", value_parser = ["on", "off"])]
    policies: String,
    /// Leave out Gemini CLI's shipped default policies (which allow read_file, glob and
    /// other read-only tools without a person)
    #[arg(long)]
    no_default_policies: bool,
    /// The admin policy tier: *.toml files here, owned by root and not group/other writable
    #[arg(long, value_name = "DIR", default_value = askbus_policy::tiers::ADMIN_DIR)]
    policy_admin_dir: PathBuf,
    /// Config file [default: $CONFIGURATION_DIRECTORY/askbusd.toml (systemd), else
    /// $XDG_CONFIG_HOME/askbus/askbusd.toml, else /etc/askbus/askbusd.toml for root, else
    /// ~/.config/askbus/askbusd.toml; a missing default file means the defaults]
    #[arg(long, value_name = "PATH", env = "ASKBUS_CONFIG")]
    config: Option<PathBuf>,
    /// Validate the config file (and the options) and exit: 0 if valid, 1 if not
    #[arg(long)]
    check_config: bool,
    /// The settings, each a flag here and a key of the file (declared once, in `config`).
    #[command(flatten)]
    options: Options,
    /// Write no telemetry file
    #[arg(long)]
    no_telemetry: bool,
    /// Refuse to federate with no NATS authentication, or to a server beyond this machine
    /// without TLS (the file's [federation] require_tls) [default: warn once]
    #[arg(long)]
    require_tls: bool,
    /// Keep nothing on disk: pending requests end `shutdown` at exit (protocol v1 exactly)
    #[arg(long)]
    no_store: bool,
    /// Print the man page (roff) and exit; packages install it as askbusd.1
    #[arg(long, hide = true)]
    man: bool,
}

impl Args {
    /// The command line as a layer over the config file.
    fn options(&self) -> Options {
        let mut options = self.options.clone();
        if self.no_telemetry {
            options.telemetry = Some(Telemetry::Off);
        }
        if self.require_tls {
            options.require_tls = Some(true);
        }
        if self.no_store {
            options.store = Some(Telemetry::Off);
        }
        options
    }

    fn config_path(&self) -> (PathBuf, bool) {
        match &self.config {
            Some(p) => (p.clone(), true),
            None => (askbusd::paths::default_config_path(), false),
        }
    }

    /// The file (if any) under the command line. An explicit file must exist; the default
    /// one may be missing.
    fn settings(&self) -> Result<(Settings, Option<PathBuf>), config::ConfigError> {
        let (path, explicit) = self.config_path();
        let file = if explicit || path.exists() {
            Some(config::load(&path)?)
        } else {
            None
        };
        let used = file.is_some().then_some(path);
        let settings = self
            .options()
            .over(file.unwrap_or_default())
            .resolve(effective_uid());
        Ok((settings, used))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.man {
        let mut page = Vec::new();
        let cmd = <Args as clap::CommandFactory>::command();
        return match clap_mangen::Man::new(cmd)
            .render(&mut page)
            .and_then(|()| std::io::Write::write_all(&mut std::io::stdout().lock(), &page))
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("askbusd: cannot print the man page: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.check_config {
        if args.policies == "on" {
            let set = policy_set(&args);
            let errors = set.errors();
            for e in &errors {
                eprintln!("askbusd: policy: {e}");
            }
            if !errors.is_empty() {
                return ExitCode::FAILURE;
            }
        }
        // The federation's credential and TLS files are read as a start would read them.
        #[cfg(feature = "federation")]
        if let Ok((s, _)) = args.settings() {
            if let Some(f) = s.daemon.federation {
                let rt = tokio::runtime::Builder::new_current_thread().build();
                let checked = rt.map_err(anyhow::Error::from).and_then(|rt| {
                    rt.block_on(f.connect_options())
                        .map(drop)
                        .map_err(anyhow::Error::from)
                });
                if let Err(e) = checked {
                    eprintln!("askbusd: {e}");
                    return ExitCode::FAILURE;
                }
                for warning in f.transport_warnings() {
                    eprintln!("askbusd: warning: federation: {warning}");
                }
            }
        }
        return match args.settings() {
            Ok((_, Some(path))) => {
                println!("{}: OK", path.display());
                ExitCode::SUCCESS
            }
            Ok((_, None)) => {
                println!(
                    "no config file at {}; the defaults and options are valid",
                    args.config_path().0.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("askbusd: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("askbusd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<()> {
    let (settings, config_file) = args.settings()?;
    let log = init_logging(settings.log_format, &settings.log_level)?;
    raise_nofile(settings.daemon.max_connections);
    // Before any thread exists: this edits the environment.
    let inherited = systemd::inherited_listener().context("cannot start")?;
    let mut rt = match settings.threads {
        None | Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(_) => tokio::runtime::Builder::new_multi_thread(),
    };
    rt.enable_all().thread_name("askbusd");
    if let Some(n) = settings.threads.filter(|&n| n > 1) {
        rt.worker_threads(n);
    }
    let rt = rt.build().context("cannot start the runtime")?;
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        // Handlers first: a SIGHUP that arrived before them would kill the daemon.
        let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
        let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
        let mut config = settings.daemon.clone();
        let inherited_socket = inherited.is_some();
        let daemon = match inherited {
            Some(listener) => {
                if let Some(path) = listener
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(Path::to_owned))
                {
                    config.socket = path;
                }
                Daemon::from_std(config, listener, false)
            }
            None => Daemon::bind(config),
        }
        .context("cannot start")?;
        let activated = if args.options.socket.is_some() && daemon.socket() != settings.daemon.socket {
            " (socket-activated; --socket ignored)"
        } else {
            ""
        };
        tracing::info!(
            socket = %daemon.socket().display(),
            inherited = inherited_socket,
            telemetry = %daemon.telemetry_path().map(|p| p.display().to_string()).unwrap_or_else(|| "off".into()),
            config = %config_file.as_deref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
            metrics = %daemon.metrics_listen().map(|m| m.to_string()).unwrap_or_else(|| "off".into()),
            "askbusd ready on {}{activated}",
            daemon.socket().display()
        );
        let control = daemon.control();
        let policy = (args.policies == "on").then(|| std::sync::Arc::new(policy_set(&args)));
        if let Some(p) = &policy {
            for e in p.errors() {
                tracing::error!("policy: {e}");
            }
            control.hub().set_policy(Some(p.clone()));
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let stop_federation = tokio_util::sync::CancellationToken::new();
        // Without the `federation` feature the config cannot name NATS servers (it is refused
        // as it is read), so there is never a task to start.
        #[cfg(feature = "federation")]
        let federation = match settings.daemon.federation.clone() {
            Some(f) => {
                tracing::info!(node = %f.node, servers = ?f.servers, prefix = %f.prefix, "federating through NATS");
                let (_, task) =
                    askbusd::federation::start(f, control.hub().clone(), stop_federation.clone())
                        .await
                        .context("cannot start federation")?;
                Some(task)
            }
            None => None,
        };
        #[cfg(not(feature = "federation"))]
        let federation: Option<tokio::task::JoinHandle<()>> = None;
        systemd::ready(&systemd::status_line(control.hub()));
        let mut helpers = vec![tokio::spawn(systemd::keep_status(
            control.hub().clone(),
            Duration::from_secs(1),
            stop.clone(),
        ))];
        if let Some(every) = systemd::watchdog_interval() {
            tracing::info!(interval_ms = every.as_millis() as u64, "watchdog enabled");
            helpers.push(tokio::spawn(systemd::keep_watchdog(
                control.hub().clone(),
                every,
                stop.clone(),
            )));
        }
        let shutdown = async {
            loop {
                tokio::select! {
                    _ = term.recv() => { tracing::info!("SIGTERM received"); break }
                    _ = int.recv() => { tracing::info!("SIGINT received"); break }
                    _ = hup.recv() => {
                        reload(&args, &control, &log, &settings);
                        if let Some(p) = &policy {
                            reload_policy(p);
                        }
                    }
                    _ = tokio::time::sleep(Duration::from_secs(2)), if policy.is_some() => {
                        // Policy files are watched by polling their mtimes: cheap, and it
                        // needs no inotify descriptor per user directory.
                        if let Some(p) = &policy {
                            reload_policy(p);
                        }
                    }
                }
            }
            systemd::stopping();
        };
        daemon.run(shutdown).await;
        stop_federation.cancel();
        if let Some(task) = federation {
            let _ = task.await;
        }
        stop.cancel();
        for h in helpers {
            let _ = h.await;
        }
        Ok::<_, anyhow::Error>(())
    })
}

/// The policy tiers: shipped defaults, the admin directory (root-owned files), and each
/// uid's own directory (its XDG_CONFIG_HOME for the daemon's own uid, else its home's).
fn policy_set(args: &Args) -> askbus_policy::daemon::PolicySet {
    let own_uid = effective_uid();
    let own_dir = askbus_policy::tiers::own_user_dir();
    askbus_policy::daemon::PolicySet::new(
        askbus_policy::daemon::Sources {
            defaults: !args.no_default_policies,
            admin_dir: args.policy_admin_dir.clone(),
            admin_owner: 0,
        },
        move |uid| {
            if uid == own_uid {
                return Some(own_dir.clone());
            }
            let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
            Some(askbus_policy::tiers::user_dir(
                None,
                &user.dir.to_string_lossy(),
            ))
        },
    )
}

/// Re-reads changed policy files; a bad file keeps its previous rules, and says so.
fn reload_policy(p: &askbus_policy::daemon::PolicySet) {
    if p.reload() {
        let errors = p.errors();
        tracing::info!(errors = errors.len(), "policy rules reloaded");
        for e in errors {
            tracing::error!("policy: {e}");
        }
    }
}

/// SIGHUP: re-read the config file under the same command line and apply what a running
/// daemon can change. A file that does not load changes nothing.
fn reload(args: &Args, control: &Control, log: &LogReload, started: &Settings) {
    systemd::reloading();
    match args.settings() {
        Ok((new, file)) => {
            let restart = control.apply(&new.daemon);
            if let Err(e) = log.set_filter(&new.log_level) {
                tracing::warn!(error = %e, "log_level not changed");
            }
            let mut restart: Vec<&str> = restart;
            if new.log_format != started.log_format {
                restart.push("log_format");
            }
            if new.threads != started.threads {
                restart.push("threads");
            }
            if !restart.is_empty() {
                tracing::warn!(keys = ?restart, "changed keys that take a restart were not applied");
            }
            log_limits(&new.daemon, file.as_deref());
        }
        Err(e) => tracing::error!("reload failed, keeping the running configuration: {e}"),
    }
    systemd::ready(&systemd::status_line(control.hub()));
}

/// Raises the soft limit on open descriptors to the hard limit (the default soft limit, 1024,
/// is far below --max-connections' 4096), and warns when it is still below
/// --max-connections: past it, accept fails and connections are answered from a spare
/// descriptor with too-many-connections instead of being served.
fn raise_nofile(max_connections: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((mut soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        tracing::debug!(from = soft, to = hard, "raised the open files limit");
        soft = hard;
    }
    // A few descriptors are the daemon's own (listener, telemetry, runtime, metrics).
    let want = max_connections as u64 + 32;
    if soft < want {
        tracing::warn!(
            nofile = soft,
            max_connections,
            "the open files limit is below --max-connections: past it connections are refused \
             (raise it with LimitNOFILE= in the unit or ulimit -n, or lower --max-connections)"
        );
    }
}

fn log_limits(c: &DaemonConfig, file: Option<&Path>) {
    let l = &c.limits;
    tracing::info!(
        config = %file.map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
        max_pending = l.max_pending_total,
        max_pending_per_uid = l.max_pending_per_uid,
        max_pending_bytes_per_uid = l.max_pending_bytes_per_uid,
        max_pending_per_connection = l.max_pending_per_connection,
        default_timeout_ms = l.default_timeout_ms,
        max_timeout_ms = l.max_timeout_ms,
        no_ui = ?l.no_ui,
        max_connections = c.max_connections,
        max_connections_per_uid = c.max_connections_per_uid,
        "configuration reloaded"
    );
}

type FilterHandle = tracing_subscriber::reload::Handle<Targets, tracing_subscriber::Registry>;

/// Changes the log filter of the running daemon ($ASKBUS_LOG or --log-level still win: they
/// are layered over the file again on every reload).
struct LogReload {
    handle: FilterHandle,
}

impl LogReload {
    fn set_filter(&self, filter: &str) -> Result<()> {
        let filter = quiet_nats(filter)
            .parse::<Targets>()
            .with_context(|| format!("bad log filter {filter:?}"))?;
        self.handle
            .reload(filter)
            .context("cannot change the log filter")
    }
}

/// The NATS client logs each of its events at info ("event: client error: nats: IO error",
/// twice a second while a server is unreachable, with no address and no reason); federation
/// logs what matters itself, once per retry with the URL and the OS error. A filter that
/// names `async_nats` is taken as it is.
fn quiet_nats(filter: &str) -> String {
    if filter.contains("async_nats") {
        filter.to_owned()
    } else {
        format!("{filter},async_nats=warn")
    }
}

fn init_logging(format: LogFormat, filter: &str) -> Result<LogReload> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{fmt, Layer};
    let targets = quiet_nats(filter)
        .parse::<Targets>()
        .with_context(|| format!("bad log filter {filter:?}"))?;
    let (filter_layer, handle) = tracing_subscriber::reload::Layer::new(targets);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let base = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false);
    let output = match format {
        LogFormat::Json => base.json().flatten_event(true).boxed(),
        // The journal stamps each line itself and takes the priority from a <N> prefix.
        LogFormat::Text if systemd::stderr_is_journal() => base
            .without_time()
            .with_level(false)
            .with_ansi(false)
            .event_format(Journald(
                fmt::format()
                    .without_time()
                    .with_level(false)
                    .with_target(false),
            ))
            .boxed(),
        LogFormat::Text => base.boxed(),
    };
    tracing_subscriber::registry()
        .with(filter_layer)
        .with(output)
        .init();
    Ok(LogReload { handle })
}

/// Prefixes each line with its syslog priority, as sd-daemon(3) describes.
struct Journald<F>(F);

impl<S, N, F> tracing_subscriber::fmt::FormatEvent<S, N> for Journald<F>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
    F: tracing_subscriber::fmt::FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let priority = match *event.metadata().level() {
            tracing::Level::ERROR => 3,
            tracing::Level::WARN => 4,
            tracing::Level::INFO => 6,
            _ => 7,
        };
        write!(writer, "<{priority}>")?;
        self.0.format_event(ctx, writer, event)
    }
}
