//! `askbus ui` end to end: the real binary in a pseudo-terminal, a real askbusd, and a raw
//! producer that reads the exact ask-user-response the daemon forwards.

mod tui_support;

use serde_json::{json, Value};
use tui_support::*;

fn db_question(multi: bool) -> Value {
    json!({"question": "Which database should the service use?", "header": "Database",
        "type": "choice", "multiSelect": multi,
        "options": [
            {"label": "PostgreSQL", "description": "Relational; the team knows it"},
            {"label": "SQLite", "description": "Embedded, no server to run"},
            {"label": "DuckDB", "description": "Columnar, for analytics"}]})
}

struct Setup {
    _dir: tempfile::TempDir,
    daemon: Daemon,
    ui: Pty,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let ui = Pty::askbus(&["ui", "--socket", daemon.socket.to_str().unwrap()]);
    ui.wait_for("connected");
    Setup {
        _dir: dir,
        daemon,
        ui,
    }
}

#[test]
fn single_choice() {
    let mut s = setup();
    let mut p = Raw::producer(&s.daemon.socket, "deploy-agent/2.1");
    p.ask("c1", json!([db_question(false)]));
    let screen = s.ui.wait_for("Which database");
    println!("{screen}");
    s.ui.keys(DOWN);
    s.ui.keys(ENTER);
    let r = p.recv_type("ask-user-response");
    assert_eq!(r["answers"], json!({"0": "SQLite"}));
}
