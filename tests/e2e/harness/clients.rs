//! The project's other clients as real processes for the end-to-end tests: the Python
//! client's and the Node client's producer scripts (`tests/chaos/producer.py`, `producer.mjs`),
//! and the compiled Node client they load.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};

/// The repository's root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The compiled Node client (a directory holding its `index.js`, ES modules):
/// `clients/node/dist` when it is newer than every source file (built by `npm test` or `npm run
/// build`); else the one this harness compiles with the client's own `tsc` under cargo's
/// target/tmp, again only when a source changed. So a stale build is never what is tested.
pub fn node_client() -> &'static Path {
    static DIST: OnceLock<PathBuf> = OnceLock::new();
    DIST.get_or_init(|| {
        let node = repo().join("clients/node");
        let dist = node.join("dist");
        if built_from(&node.join("src"), &dist) {
            return dist;
        }
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("askbus-node-client");
        if built_from(&node.join("src"), &out) {
            return out;
        }
        let tsc = node.join("node_modules/.bin/tsc");
        assert!(
            tsc.exists(),
            "the Node client is not built and cannot be: run `npm ci` in clients/node"
        );
        let status = Command::new(&tsc)
            .arg("-p")
            .arg(node.join("tsconfig.json"))
            .arg("--outDir")
            .arg(&out)
            .args(["--declaration", "false", "--declarationMap", "false"])
            .args(["--sourceMap", "false"])
            .status()
            .expect("run tsc");
        assert!(status.success(), "tsc failed to build the Node client");
        // Outside clients/node, nothing says these .js files are ES modules but this.
        std::fs::write(out.join("package.json"), r#"{"type":"module"}"#).expect("package.json");
        out
    })
}

/// Whether every `.ts` file in `src` has a `.js` in `out` at least as new.
fn built_from(src: &Path, out: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    std::fs::read_dir(src)
        .expect("clients/node/src")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "ts"))
        .all(|ts| {
            let js = out.join(ts.with_extension("js").file_name().unwrap());
            matches!((modified(&ts), modified(&js)), (Some(t), Some(j)) if j >= t)
        })
}

/// What a producer script is given: it asks, under ids `NAME:INDEX`, the questions of the
/// indices in `todo` (`questions_for(index)` in the scripts), `concurrency` at a time, and
/// logs one JSON line per event into `log` (see the scripts' headers).
pub struct ProducerScript<'a> {
    pub socket: &'a Path,
    pub name: &'a str,
    pub todo: &'a [usize],
    pub concurrency: usize,
    pub timeout_ms: u64,
    /// k > 0: every index with `index % k == k - 1` is an approval (`tool_for(index)`) instead
    /// of questions; 0: questions only.
    pub approve_every: usize,
    /// Where the todo list, the log and stderr go (`NAME.todo`, `NAME.log`, `NAME.err`).
    pub dir: &'a Path,
}

impl ProducerScript<'_> {
    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    pub fn stderr(&self) -> PathBuf {
        self.dir.join(format!("{}.err", self.name))
    }

    fn todo_file(&self) -> PathBuf {
        let file = self.dir.join(format!("{}.todo", self.name));
        let list: String = self.todo.iter().map(|i| format!("{i}\n")).collect();
        std::fs::write(&file, list).expect("write todo");
        file
    }

    fn spawn(&self, mut cmd: Command) -> Child {
        cmd.arg(self.socket)
            .arg(self.name)
            .arg(self.todo_file())
            .arg(self.log())
            .arg(self.concurrency.to_string())
            .arg(self.timeout_ms.to_string())
            .arg(self.approve_every.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.stderr()).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()))
    }

    /// `tests/chaos/producer.py`, through `clients/python` (needs python3).
    pub fn python(&self) -> Child {
        let mut cmd = Command::new("python3");
        cmd.arg(repo().join("tests/chaos/producer.py"))
            .env("PYTHONPATH", repo().join("clients/python/src"))
            .env("PYTHONDONTWRITEBYTECODE", "1");
        self.spawn(cmd)
    }

    /// `tests/chaos/producer.mjs`, through the Node client (needs node).
    pub fn node(&self) -> Child {
        let mut cmd = Command::new("node");
        cmd.arg(repo().join("tests/chaos/producer.mjs"))
            .arg(node_client());
        self.spawn(cmd)
    }
}

/// The questions the producer scripts ask for an index (their `questions_for`): one to three,
/// of every type.
pub fn questions_for(index: usize) -> Value {
    let choice = json!({"question": format!("Which database for task {index}?"),
        "header": "Database", "type": "choice",
        "options": [{"label": "SQLite", "description": "A single file"},
                    {"label": "PostgreSQL", "description": "A server"}]});
    let yesno = json!({"question": "Run the migration now?", "header": "Migrate", "type": "yesno"});
    let text = json!({"question": "Name the new table", "header": "Table", "type": "text",
        "placeholder": "e.g. accounts"});
    match index % 3 {
        0 => json!([choice]),
        1 => json!([choice, yesno]),
        _ => json!([text, yesno, choice]),
    }
}

/// The tool call, details and offered outcomes of the approval the producer scripts ask for
/// an index (their `tool_for`).
pub fn tool_for(index: usize) -> Value {
    let command = format!("make task-{index}");
    json!({
        "toolCall": {"name": "run_shell_command", "args": {"command": command}},
        "details": {"type": "exec", "title": "Confirm Shell Command", "command": command,
                    "rootCommand": "make", "rootCommands": ["make"]},
        "outcomes": ["proceed_once", "proceed_always", "modify_with_editor", "cancel"],
    })
}
