//! One version for everything askbus ships: the root package (daemon and CLI), the Rust client
//! crate, the Python and Node clients (their metadata and the version the code reports), the
//! protocol text and the changelog must all say the same, or a release would ship a mix.

use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn toml_version(rel: &str, table: &str) -> String {
    let doc: toml::Table = toml::from_str(&read(rel)).unwrap();
    doc[table]["version"]
        .as_str()
        .unwrap_or_else(|| panic!("{rel}: no {table}.version"))
        .to_owned()
}

#[test]
fn every_package_and_document_carries_the_same_version() {
    let version = env!("CARGO_PKG_VERSION");
    // The workspace names the version once; every member takes it from there.
    let root: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let mut found = vec![(
        "Cargo.toml workspace.package",
        root["workspace"]["package"]["version"]
            .as_str()
            .unwrap()
            .to_owned(),
    )];
    for member in root["workspace"]["members"].as_array().unwrap() {
        let dir = member.as_str().unwrap();
        let rel = format!("{dir}/Cargo.toml");
        let doc: toml::Table = toml::from_str(&read(&rel)).unwrap();
        assert_eq!(
            doc["package"]["version"]["workspace"].as_bool(),
            Some(true),
            "{rel}: version.workspace = true, so one line names the version"
        );
    }
    found.push((
        "clients/python/pyproject.toml",
        toml_version("clients/python/pyproject.toml", "project"),
    ));
    let python_init = read("clients/python/src/askbus/__init__.py");
    let line = python_init
        .lines()
        .find(|l| l.starts_with("__version__ = "))
        .expect("askbus.__version__");
    found.push((
        "askbus.__version__",
        line.trim_start_matches("__version__ = ")
            .trim_matches('"')
            .to_owned(),
    ));
    let package: serde_json::Value =
        serde_json::from_str(&read("clients/node/package.json")).unwrap();
    found.push((
        "clients/node/package.json",
        package["version"].as_str().unwrap().to_owned(),
    ));
    let lock: serde_json::Value =
        serde_json::from_str(&read("clients/node/package-lock.json")).unwrap();
    found.push((
        "clients/node/package-lock.json",
        lock["version"].as_str().unwrap().to_owned(),
    ));
    // The members depend on each other at exactly their own version.
    for dep in root["workspace"]["dependencies"]
        .as_table()
        .unwrap()
        .values()
    {
        if dep.get("path").is_some() {
            let v = dep["version"].as_str().unwrap().trim_start_matches('=');
            found.push(("Cargo.toml workspace.dependencies", v.to_owned()));
        }
    }
    for (what, v) in &found {
        assert_eq!(v, version, "{what} says {v}, the daemon {version}");
    }
    assert!(
        read("proto/PROTOCOL.md").contains(&format!("ships with askbus {version}")),
        "proto/PROTOCOL.md does not name askbus {version}"
    );
    assert!(
        read("CHANGELOG.md").contains(&format!("## [{version}]")),
        "CHANGELOG.md has no section for {version}"
    );
}

#[test]
fn the_daemon_reports_the_version_in_welcome_and_both_binaries_in_version() {
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(askbusd::SERVER_NAME, format!("askbusd/{version}"));
    for bin in [env!("CARGO_BIN_EXE_askbusd"), env!("CARGO_BIN_EXE_askbus")] {
        let out = std::process::Command::new(bin)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
        let name = Path::new(bin).file_name().unwrap().to_str().unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap().trim(),
            format!("{name} {version}")
        );
    }
}
