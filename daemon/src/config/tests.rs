//! The configuration file's parsing, layering and resolution, key by key.

use std::path::Path;

use super::*;

fn parse_ok(text: &str) -> Options {
    parse(text, Path::new("t.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_err(text: &str) -> ConfigError {
    parse(text, Path::new("t.toml")).expect_err("should not parse")
}

#[test]
fn every_key_parses() {
    let o = parse_ok(
        r#"
socket = "/run/askbus/askbus.sock"
telemetry = "/var/lib/askbus/telemetry.jsonl"
default_timeout_ms = 1000
max_timeout_ms = 2000
no_ui = "reject"
max_frame_bytes = 4096
max_pending_per_connection = 3
max_pending_per_uid = 4
max_pending_bytes_per_uid = 65536
telemetry_group = "root"
max_pending = 5
max_connections = 6
max_connections_per_uid = 7
max_queue_bytes = 8192
frame_timeout_ms = 500
log_format = "json"
log_level = "askbus=debug,info"
threads = 2
metrics_listen = "127.0.0.1:9464"

[access]
producer_users = ["root", 1001]
producer_groups = [0]
ui_users = [1002]
ui_groups = ["root"]
operator_users = [1003]
operator_groups = [1004]
"#,
    );
    let want = Options {
        socket: Some("/run/askbus/askbus.sock".into()),
        telemetry: Some(Telemetry::At("/var/lib/askbus/telemetry.jsonl".into())),
        default_timeout_ms: Some(1000),
        max_timeout_ms: Some(2000),
        no_ui: Some(NoUiPolicy::Reject),
        max_frame_bytes: Some(4096),
        max_pending_per_connection: Some(3),
        max_pending_per_uid: Some(4),
        max_pending_bytes_per_uid: Some(65536),
        telemetry_group: Some(0),
        max_pending: Some(5),
        max_connections: Some(6),
        max_connections_per_uid: Some(7),
        max_queue_bytes: Some(8192),
        frame_timeout_ms: Some(500),
        log_format: Some(LogFormat::Json),
        log_level: Some("askbus=debug,info".into()),
        threads: Some(2),
        metrics_listen: Some(MetricsListen::Tcp("127.0.0.1:9464".parse().unwrap())),
        access: Some(AccessOptions {
            producer_users: [0, 1001].into(),
            producer_groups: [0].into(),
            ui_users: [1002].into(),
            ui_groups: [0].into(),
            operator_users: [1003].into(),
            operator_groups: [1004].into(),
        }),
        ..Options::default()
    };
    assert_eq!(o, want);
    let s = o.resolve(1000).daemon;
    assert_eq!(s.limits.max_pending_per_uid, 4);
    assert_eq!(s.limits.max_pending_bytes_per_uid, 65536);
    assert_eq!(s.telemetry_group, Some(0));
    assert_eq!(s.max_connections_per_uid, 7);
    assert_eq!(s.access.operators.uids, [1003].into());
    assert_eq!(s.access.own_uid, 1000);
    assert_eq!(s.frame_timeout, std::time::Duration::from_millis(500));
}

#[test]
fn an_empty_file_means_the_defaults_and_telemetry_can_be_switched_off() {
    assert_eq!(parse_ok(""), Options::default());
    assert_eq!(
        parse_ok("telemetry = false").telemetry,
        Some(Telemetry::Off)
    );
    assert_eq!(
        parse_ok("telemetry = true").telemetry,
        Some(Telemetry::Default)
    );
    let s = parse_ok("telemetry = false").resolve(0);
    assert_eq!(s.daemon.telemetry, None);
    assert_eq!(s.daemon.limits, Limits::default());
}

#[test]
fn unknown_keys_are_named_with_their_line() {
    let e = parse_err("max_pending = 5\n\nmax_pendin = 4\n");
    assert_eq!(e.line(), Some(3), "{e}");
    assert_eq!(e.key(), Some("max_pendin"), "{e}");
    assert!(
        e.to_string()
            .starts_with("t.toml:3:1: max_pendin: unknown field"),
        "{e}"
    );
    let e = parse_err("[access]\nui_user = [1]\n");
    assert_eq!(e.line(), Some(2), "{e}");
    assert_eq!(e.key(), Some("access.ui_user"), "{e}");
}

#[test]
fn bad_values_are_named_with_their_line() {
    for (text, key, line, says) in [
        ("max_pending = 0", "max_pending", 1, "at least 1"),
        (
            "\nmax_frame_bytes = 10",
            "max_frame_bytes",
            2,
            "between 64 and",
        ),
        ("no_ui = \"maybe\"", "no_ui", 1, "unknown variant"),
        ("threads = \"two\"", "threads", 1, "invalid type"),
        (
            "max_queue_bytes = -1",
            "max_queue_bytes",
            1,
            "invalid value",
        ),
        ("log_format = \"xml\"", "log_format", 1, "unknown variant"),
        ("store_sync = \"off\"", "store_sync", 1, "unknown variant"),
        ("log_level = \"=[\"", "log_level", 1, "bad log filter"),
        (
            "metrics_listen = \"0.0.0.0:9\"",
            "metrics_listen",
            1,
            "not a loopback",
        ),
        (
            "telemetry = 3",
            "telemetry",
            1,
            "a file path, or true or false",
        ),
        (
            "[access]\n\nui_users = [\"no-such-user-xyz\"]",
            "access.ui_users",
            3,
            "no user named",
        ),
        (
            "[access]\noperator_groups = [\"no-such-group-xyz\"]",
            "access.operator_groups",
            2,
            "no group named",
        ),
        (
            "[access]\nui_users = [-5]",
            "access.ui_users",
            2,
            "not a valid id",
        ),
    ] {
        let e = parse_err(text);
        assert_eq!(e.key(), Some(key), "{text:?}: {e}");
        assert_eq!(e.line(), Some(line), "{text:?}: {e}");
        assert!(e.to_string().contains(says), "{text:?}: {e}");
    }
}

#[test]
fn syntax_errors_give_their_line() {
    let e = parse_err("max_pending = 5\nsocket = \n");
    assert_eq!(e.line(), Some(2), "{e}");
    assert_eq!(e.key(), None, "{e}");
}

#[test]
fn flags_override_the_file_and_the_file_the_defaults() {
    let file = parse_ok("max_pending = 5\nmax_connections = 9\nno_ui = \"reject\"");
    let flags = Options {
        max_pending: Some(7),
        ..Options::default()
    };
    let s = flags.over(file).resolve(0).daemon;
    assert_eq!(s.limits.max_pending_total, 7);
    assert_eq!(s.max_connections, 9);
    assert_eq!(s.limits.no_ui, NoUiPolicy::Reject);
    assert_eq!(s.max_queue_bytes, DaemonConfig::default().max_queue_bytes);
}

#[test]
fn the_default_timeout_is_clamped_to_the_maximum() {
    let s = parse_ok("default_timeout_ms = 5000\nmax_timeout_ms = 100").resolve(0);
    assert_eq!(s.daemon.limits.default_timeout_ms, 100);
}

#[test]
fn no_ui_on_the_command_line_takes_the_protocols_words() {
    let cmd =
        clap::Command::new("t").arg(clap::Arg::new("p").long("no-ui").value_parser(no_ui_arg()));
    for policy in [NoUiPolicy::Wait, NoUiPolicy::Reject] {
        let m = cmd
            .clone()
            .try_get_matches_from(["t", "--no-ui", policy.as_str()])
            .unwrap();
        assert_eq!(m.get_one::<NoUiPolicy>("p"), Some(&policy));
    }
    for wrong in ["Wait", "no-ui", ""] {
        let err = cmd
            .clone()
            .try_get_matches_from(["t", "--no-ui", wrong])
            .unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::InvalidValue,
            "{wrong:?}"
        );
    }
}

/// The flags and the file's keys are one declaration: every key is a flag of the same name
/// (`max_pending` is `--max-pending`) except the file-only tables, and every flag a key.
#[test]
fn every_key_is_a_flag_and_every_flag_a_key() {
    use clap::Args as _;
    let flags: BTreeSet<String> = Options::augment_args(clap::Command::new("t"))
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(|l| l.replace('-', "_"))
        .collect();
    // serde lists every field in its unknown-field error.
    let message = parse_err("no_such_key = 1").to_string();
    let keys: BTreeSet<String> = message
        .split('`')
        .skip(3)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert!(keys.contains("max_pending"), "{message}");
    let file_only: BTreeSet<String> = ["access", "federation"].map(str::to_owned).into();
    let keys_with_flags: BTreeSet<String> = keys.difference(&file_only).cloned().collect();
    assert_eq!(flags, keys_with_flags);
}

/// A flag is read as its key is: the same bounds and the same checks. (It names NATS servers,
/// which only a daemon with federation takes.)
#[cfg(feature = "federation")]
#[test]
fn a_flag_takes_what_its_key_takes() {
    use clap::{Args as _, FromArgMatches as _};
    let flags = |argv: &[&str]| {
        // The negations the flags conflict with are the binary's.
        let cmd = Options::augment_args(clap::Command::new("t").no_binary_name(true))
            .arg(clap::Arg::new("no_telemetry").long("no-telemetry"))
            .arg(clap::Arg::new("no_store").long("no-store"));
        cmd.try_get_matches_from(argv)
            .and_then(|m| Options::from_arg_matches(&m))
    };
    let o = flags(&[
        "--max-pending",
        "5",
        "--nats",
        "nats://a:4222, nats://b:4222",
        "--node",
        "n-1",
        "--store",
        "/tmp/a.db",
        "--resume-grace",
        "90s",
        "--store-sync",
        "normal",
    ])
    .unwrap();
    let file = parse_ok(
        r#"
max_pending = 5
nats = "nats://a:4222, nats://b:4222"
node = "n-1"
store = "/tmp/a.db"
resume_grace = "90s"
store_sync = "normal"
"#,
    );
    assert_eq!(o, file);
    let store = o.resolve(0).daemon.store.expect("a store");
    assert_eq!(store.sync, crate::store::StoreSync::Normal);
    for bad in [
        &["--max-pending", "0"][..],
        &["--max-frame-bytes", "63"],
        &["--node", "a b"],
        &["--nats", "nats://a b"],
        &["--threads", "1025"],
    ] {
        let key = bad[0].trim_start_matches("--").replace('-', "_");
        let value = if key == "node" || key == "nats" {
            format!("{:?}", bad[1])
        } else {
            bad[1].to_owned()
        };
        assert!(flags(bad).is_err(), "flag {bad:?} accepted");
        parse_err(&format!("{key} = {value}"));
    }
}

/// A daemon built without the `federation` feature links no NATS client: a config that asks
/// for federation, in the file or on the command line, is refused with the reason, not run as
/// a daemon that silently shares nothing.
#[cfg(not(feature = "federation"))]
#[test]
fn nats_is_refused_without_the_federation_feature() {
    use clap::{Args as _, FromArgMatches as _};
    let err = parse_err("nats = \"nats://127.0.0.1:4222\"\n").to_string();
    assert!(err.contains("built without federation"), "{err}");
    assert!(err.starts_with("t.toml:1:"), "{err}");
    // The negations the flags conflict with are the binary's.
    let cmd = Options::augment_args(clap::Command::new("t").no_binary_name(true))
        .arg(clap::Arg::new("no_telemetry").long("no-telemetry"))
        .arg(clap::Arg::new("no_store").long("no-store"));
    let err = cmd
        .try_get_matches_from(["--nats", "nats://127.0.0.1:4222"])
        .and_then(|m| Options::from_arg_matches(&m))
        .unwrap_err()
        .to_string();
    assert!(err.contains("built without federation"), "{err}");
    // Without nats the rest of [federation] is inert, as in a federating build.
    parse_ok("node = \"n-1\"\n");
}
