#!/usr/bin/env bash
# Installs what askbus ships the way a user would, from the artifacts a release makes, smoke-
# tests each installed copy against a real daemon (one question asked, one answered), and
# uninstalls it:
#   rust    `cargo package -p askbus`: the crate's own tests, unpacked alone, and a new project
#           depending on it that asks and answers
#   python  `python3 -m build`: the wheel in a fresh venv running the whole client suite against
#           it (ASKBUS_TEST_INSTALLED=1), the sdist in another venv asking and answering
#   node    `npm pack`: the tarball in an empty project (no dependency pulled, its types
#           checked by tsc), its examples asking, a script of the project answering
#   deb     (--deb, as root: it runs dpkg) `scripts/deb.sh`, `dpkg -i`: the units verify, the
#           binaries in /usr/bin, man pages, completions, the user socket enabled, a smoke
#           ask/answer with /usr/bin/askbus*, then `dpkg -r` and `dpkg -P` leave nothing
# Usage: scripts/package-test.sh [--deb] [rust] [python] [node]   (no part named: all three)
# Without --deb, the daemon and CLI are $ASKBUS_DAEMON / $ASKBUS_CLI, else target/debug/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

deb=0
parts=()
for a in "$@"; do
  case "$a" in
    --deb) deb=1 ;;
    rust | python | node) parts+=("$a") ;;
    *) echo "package-test.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || [ $deb = 1 ] || parts=(rust python node)

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
DAEMON=${ASKBUS_DAEMON:-$ROOT/target/debug/askbusd}
CLI=${ASKBUS_CLI:-$ROOT/target/debug/askbus}
WORK=$(mktemp -d)
DPID=
cleanup() {
  [ -z "$DPID" ] || kill "$DPID" 2>/dev/null || true
  if [ $deb = 1 ] && dpkg -s askbusd >/dev/null 2>&1; then dpkg -P askbusd >/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
step() { echo "== package-test: $*"; }

# A daemon of our own on a fresh socket (SOCK); waits until it answers.
start_daemon() {
  SOCK="$WORK/askbus-$1.sock"
  # Protocol v1 exactly: no shared default store, no policy deciding the clients' approvals.
  ASKBUS_POLICIES=off "$2" --socket "$SOCK" --no-telemetry --no-store 2>"$WORK/daemon-$1.log" &
  DPID=$!
  for _ in $(seq 300); do
    "$CLI" --socket "$SOCK" stats --json >/dev/null 2>&1 && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$WORK/daemon-$1.log" >&2
  fail "askbusd ($2) did not start"
}
stop_daemon() {
  kill "$DPID"
  wait "$DPID" || fail "askbusd exited with $? on SIGTERM"
  DPID=
}

# The correlationId of the first pending question, once there is one.
wait_pending() {
  for _ in $(seq 600); do
    id=$("$CLI" --socket "$SOCK" pending --json |
      python3 -c 'import json,sys; a=json.load(sys.stdin); print(a[0]["correlationId"] if a else "")')
    [ -n "$id" ] && { echo "$id"; return 0; }
    sleep 0.1
  done
  fail "no question arrived"
}

# Runs the asking command "$@" in the background, answers its question 0 with "Yes" from the
# CLI, and checks it printed the answer.
ask_and_answer_with_cli() {
  local what=$1
  shift
  "$@" >"$WORK/asked.out" 2>&1 &
  local asker=$!
  local id
  id=$(wait_pending)
  "$CLI" --socket "$SOCK" answer "$id" --answer "0=$ANSWER" >/dev/null
  wait "$asker" || { cat "$WORK/asked.out" >&2; fail "$what exited $?"; }
  grep -q "$ANSWER" "$WORK/asked.out" || { cat "$WORK/asked.out" >&2; fail "$what did not print the answer"; }
}

# Asks with the CLI while the answering command "$@" (which answers question 0 with $ANSWER)
# runs; checks the CLI got the answer.
answer_cli_question_with() {
  local what=$1
  shift
  "$@" >"$WORK/answerer.out" 2>&1 &
  local answerer=$!
  echo "[{\"question\": \"Ship it?\", \"header\": \"Ship\", \"type\": \"yesno\"}]" |
    "$CLI" --socket "$SOCK" ask --json --client package-test >"$WORK/ask.json" ||
    { cat "$WORK/answerer.out" >&2; fail "askbus ask exited $? answered by $what"; }
  wait "$answerer" || { cat "$WORK/answerer.out" >&2; fail "$what exited $?"; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["answers"]["0"]==sys.argv[2], r' \
    "$WORK/ask.json" "$ANSWER" || fail "$what's answer did not arrive"
}

YESNO='[{"question": "Ship it?", "header": "Ship", "type": "yesno"}]'
ANSWER=Yes

part_rust() {
  step "rust: cargo package -p askbus"
  # --no-verify: the unpacked crate is built and tested right below, outside the workspace;
  # --allow-dirty: this tests the tree as it is, committed or not.
  cargo package -p askbus --locked --quiet --no-verify --allow-dirty
  local crate="$ROOT/target/package/askbus-$VERSION.crate"
  [ -f "$crate" ] || fail "no $crate"
  mkdir -p "$WORK/rust"
  # --touch: the files get this run's time, so cargo rebuilds the crate's tests from this
  # directory. With the crate's own times, the test binaries kept in CARGO_TARGET_DIR from an
  # earlier run look fresh, and they have that run's (deleted) directory built in as
  # CARGO_MANIFEST_DIR, where the conformance tests read tests/data.
  tar xzf "$crate" --touch -C "$WORK/rust"
  export CARGO_TARGET_DIR="$ROOT/target/package-test"
  step "rust: the packaged crate's own tests, outside the workspace"
  # As a dependent builds it (no fast paths), then with the daemon's `fast` paths and their
  # equivalence tests (the workspace turns the feature on through a path dev-dependency, which
  # `cargo package` drops).
  cargo test --quiet --manifest-path "$WORK/rust/askbus-$VERSION/Cargo.toml"
  cargo test --quiet --manifest-path "$WORK/rust/askbus-$VERSION/Cargo.toml" --features fast
  step "rust: a project depending on the packaged crate asks and answers"
  mkdir -p "$WORK/rust/smoke/src"
  cat >"$WORK/rust/smoke/Cargo.toml" <<EOF
[package]
name = "askbus-smoke"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
askbus = { path = "$WORK/rust/askbus-$VERSION" }
serde_json = "1"
tokio = { version = "1", features = ["rt", "macros"] }
EOF
  cat >"$WORK/rust/smoke/src/main.rs" <<'EOF'
//! Asks one question and answers it from a UI of its own, through the daemon at argv[1].
use std::collections::BTreeMap;
use std::path::PathBuf;

use askbus::client::{Ask, Producer, Ui, UiEvent};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let socket = PathBuf::from(std::env::args().nth(1).expect("socket"));
    let mut ui = Ui::subscribe(&socket, Some("smoke-ui/1")).await.expect("subscribe");
    let answering = tokio::spawn(async move {
        loop {
            if let Some(UiEvent::Request(req)) = ui.next().await.expect("event") {
                let answers = BTreeMap::from([(0, "Yes".to_owned())]);
                ui.answer(&req.correlation_id, &answers).await.expect("answer");
                return ui;
            }
        }
    });
    let producer = Producer::connect(&socket, Some("smoke/1")).await.expect("connect");
    let questions =
        serde_json::json!([{"question": "Ship it?", "header": "Ship", "type": "yesno"}]);
    let r = producer
        .ask(Ask { questions, ..Ask::default() })
        .await
        .expect("ask");
    drop(answering.await.expect("the UI task"));
    assert_eq!(r.answers.get(&0).map(String::as_str), Some("Yes"), "{r:?}");
    println!("answered: {}", r.answers[&0]);
}
EOF
  start_daemon rust "$DAEMON"
  # Output is read whole before grep: `cmd | grep -q` under pipefail fails when grep exits early.
  out=$(cargo run --quiet --manifest-path "$WORK/rust/smoke/Cargo.toml" -- "$SOCK" || true)
  grep -q "answered: Yes" <<<"$out" ||
    fail "the Rust smoke project"
  stop_daemon
  unset CARGO_TARGET_DIR
}

part_python() {
  step "python: python3 -m build (wheel and sdist)"
  python3 -c 'import build, venv' 2>/dev/null ||
    fail "python3 -m build needs the build module and venvs: pip install build; apt-get install python3-venv"
  python3 -m build --outdir "$WORK/py-dist" clients/python >"$WORK/py-build.log" 2>&1 ||
    { cat "$WORK/py-build.log" >&2; fail "python3 -m build"; }
  git status --porcelain --ignored clients/python | grep -E '^(!!|\?\?).*(build/|egg-info|dist/)' &&
    fail "building left files in clients/python"
  local wheel sdist
  wheel=$(ls "$WORK"/py-dist/askbus-"$VERSION"-py3-none-any.whl)
  sdist=$(ls "$WORK"/py-dist/askbus-"$VERSION".tar.gz)
  step "python: the wheel in a fresh venv passes the client's suite"
  python3 -m venv "$WORK/venv-wheel"
  "$WORK/venv-wheel/bin/pip" install --quiet "$wheel"
  ASKBUS_TEST_INSTALLED=1 ASKBUS_DAEMON="$DAEMON" "$WORK/venv-wheel/bin/python" -m unittest \
    discover -s clients/python/tests -t clients/python 2>"$WORK/py-tests.log" ||
    { tail -40 "$WORK/py-tests.log" >&2; fail "the Python suite against the installed wheel"; }
  tail -3 "$WORK/py-tests.log"
  step "python: the sdist in a fresh venv asks and answers"
  python3 -m venv "$WORK/venv-sdist"
  "$WORK/venv-sdist/bin/pip" install --quiet "$sdist"
  local py="$WORK/venv-sdist/bin/python"
  (cd "$WORK" && "$py" -I -c 'import askbus, sys; assert askbus.__version__ == sys.argv[1]' "$VERSION") ||
    fail "the sdist's version"
  start_daemon python "$DAEMON"
  ask_and_answer_with_cli "askbus.ask (sdist)" "$py" -I -c '
import sys, askbus
r = askbus.ask([{"question": "Ship it?", "header": "Ship", "type": "yesno"}], socket=sys.argv[1])
print(r.reason, r.answers)' "$SOCK"
  answer_cli_question_with "askbus.subscribe (sdist)" "$py" -I -c '
import sys, askbus
with askbus.subscribe(socket=sys.argv[1]) as sub:
    for req in sub:
        req.answer({"0": "Yes"})
        break' "$SOCK"
  stop_daemon
  "$WORK/venv-sdist/bin/pip" uninstall --quiet --yes askbus
  "$py" -I -c 'import askbus' 2>/dev/null && fail "askbus still imports after pip uninstall"
  step "python: pip install ./clients/python from the checkout leaves the tree as it was"
  "$WORK/venv-sdist/bin/pip" install --quiet ./clients/python
  (cd "$WORK" && "$py" -I -c 'import askbus') || fail "pip install ./clients/python"
  git status --porcelain --ignored clients/python | grep -E '^(!!|\?\?)' | grep -v __pycache__ &&
    fail "pip install ./clients/python left files in the tree"
  true
}

part_node() {
  step "node: npm pack, installed into an empty project"
  (cd clients/node && { [ -d node_modules ] || npm ci --no-audit --no-fund; } &&
    npm pack --silent --pack-destination "$WORK" >/dev/null)
  local tgz="$WORK/askbus-$VERSION.tgz"
  [ -f "$tgz" ] || fail "no $tgz"
  mkdir -p "$WORK/node-project"
  cd "$WORK/node-project"
  echo '{"name": "askbus-user", "version": "1.0.0", "private": true, "type": "module"}' >package.json
  npm install --no-audit --no-fund --silent "$tgz"
  local installed
  installed=$(ls node_modules | grep -v '^\.' | tr '\n' ' ')
  [ "$installed" = "askbus " ] || fail "installing the tarball pulled in: $installed"
  [ -f node_modules/askbus/dist/index.d.ts ] || fail "the tarball has no types"
  step "node: its types check in a user's TypeScript"
  cat >check.ts <<'EOF'
import { ask, subscribe, type AskResponse } from "askbus";
const r: AskResponse = await ask([{ question: "Ship it?", header: "Ship", type: "yesno" }]);
const answers: Record<string, string> = r.answers;
for await (const req of subscribe()) await req.answer(answers);
EOF
  "$ROOT/clients/node/node_modules/.bin/tsc" --noEmit --strict --target ES2022 --module nodenext \
    --moduleResolution nodenext --typeRoots "$ROOT/clients/node/node_modules/@types" --types node \
    check.ts || fail "the package's types"
  step "node: examples/ask.mjs asks, a project script answers"
  start_daemon node "$DAEMON"
  ANSWER=SQLite ask_and_answer_with_cli "examples/ask.mjs" env ASKBUS_SOCKET="$SOCK" \
    node node_modules/askbus/examples/ask.mjs
  cat >answer.mjs <<'EOF'
import { subscribe } from "askbus";
const sub = subscribe({ socket: process.argv[2] });
for await (const req of sub) {
  console.log(await req.answer({ "0": "Yes" }));
  break;
}
sub.close();
EOF
  answer_cli_question_with "answer.mjs" node answer.mjs "$SOCK"
  stop_daemon
  npm uninstall --no-audit --no-fund --silent askbus
  [ ! -e node_modules/askbus ] || fail "npm uninstall left node_modules/askbus"
  cd "$ROOT"
}

debian() {
  [ "$(id -u)" = 0 ] || fail "--deb installs a package: run as root"
  step "deb: scripts/deb.sh"
  ./scripts/deb.sh --quiet
  local pkg
  pkg=$(ls target/debian/askbusd_"$VERSION"-*.deb | tail -1)
  ls -l "$pkg"
  dpkg -s askbusd >/dev/null 2>&1 && fail "askbusd is installed already; remove it first"
  step "deb: dpkg -i"
  dpkg -i "$pkg"
  [ "$(/usr/bin/askbusd --version)" = "askbusd $VERSION" ] || fail "/usr/bin/askbusd --version"
  [ "$(/usr/bin/askbus --version)" = "askbus $VERSION" ] || fail "/usr/bin/askbus --version"
  step "deb: the units verify"
  local out
  out=$(systemd-analyze verify /usr/lib/systemd/system/askbusd.socket \
    /usr/lib/systemd/system/askbusd.service 2>&1) || fail "system units: $out"
  [ -z "$out" ] || fail "system units: $out"
  mkdir -m 700 "$WORK/xdg-runtime"
  out=$(XDG_RUNTIME_DIR="$WORK/xdg-runtime" systemd-analyze --user verify \
    /usr/lib/systemd/user/askbusd.socket /usr/lib/systemd/user/askbusd.service 2>&1) ||
    fail "user units: $out"
  [ -z "$out" ] || fail "user units: $out"
  getent group askbus >/dev/null || fail "no group askbus"
  [ -L /etc/systemd/user/sockets.target.wants/askbusd.socket ] ||
    fail "the user socket is not enabled for new sessions"
  [ ! -e /etc/systemd/system/sockets.target.wants/askbusd.socket ] ||
    fail "the system socket was enabled"
  [ -f /etc/askbus/askbusd.toml ] || fail "no /etc/askbus/askbusd.toml"
  /usr/bin/askbusd --check-config --config /etc/askbus/askbusd.toml >/dev/null
  step "deb: man pages and completions"
  local mandir=/usr/share/man/man1 man=(man)
  if grep -rqs 'path-exclude.*usr/share/man' /etc/dpkg/dpkg.cfg.d/; then
    # A slimmed image (docker's dpkg excludes): dpkg -i skipped the pages; read the package's.
    echo "dpkg excludes man pages here: checking the pages in the package"
    dpkg-deb -x "$pkg" "$WORK/deb-root"
    mandir="$WORK/deb-root/usr/share/man/man1"
    man=(man -l)
  fi
  for page in askbus askbus-ask askbus-service-install askbusd; do
    [ -f "$mandir/$page.1.gz" ] || fail "no man page $page"
  done
  local page=askbus pagedaemon=askbusd
  [ ${#man[@]} = 1 ] || { page="$mandir/askbus.1.gz"; pagedaemon="$mandir/askbusd.1.gz"; }
  out=$(MANPAGER=cat MANWIDTH=80 "${man[@]}" "$page" 2>/dev/null || true)
  grep -q "askbus-ask(1)" <<<"$out" ||
    fail "man askbus"
  out=$(MANPAGER=cat MANWIDTH=80 "${man[@]}" "$pagedaemon" 2>/dev/null || true)
  grep -q -- "--max-pending" <<<"$out" ||
    fail "man askbusd"
  bash -c 'source /usr/share/bash-completion/completions/askbus && complete -p askbus' >/dev/null ||
    fail "bash completion"
  [ -f /usr/share/zsh/vendor-completions/_askbus ] || fail "zsh completion"
  [ -f /usr/share/fish/vendor_completions.d/askbus.fish ] || fail "fish completion"
  step "deb: /usr/bin/askbus asks, /usr/bin/askbus answers, /usr/bin/askbusd brokers"
  local cli_before=$CLI
  CLI=/usr/bin/askbus
  start_daemon deb /usr/bin/askbusd
  ask_and_answer_with_cli "/usr/bin/askbus ask" sh -c "echo '$YESNO' | /usr/bin/askbus --socket '$SOCK' ask"
  stop_daemon
  out=$(/usr/bin/askbus service install --user --dry-run || true)
  grep -qx "ExecStart=/usr/bin/askbusd" <<<"$out" ||
    fail "service install --dry-run does not run /usr/bin/askbusd"
  XDG_CONFIG_HOME="$WORK/xdg-config" /usr/bin/askbus service status --user >"$WORK/status.out" ||
    { cat "$WORK/status.out" >&2; fail "service status does not see the package's user units"; }
  grep -q "the package's /usr/lib/systemd/user/askbusd.service applies" "$WORK/status.out" ||
    fail "service status: $(cat "$WORK/status.out")"
  CLI=$cli_before
  step "deb: dpkg -r, then dpkg -P"
  dpkg -r askbusd
  for f in /usr/bin/askbusd /usr/bin/askbus /usr/lib/systemd/system/askbusd.service \
    /usr/lib/systemd/user/askbusd.socket /usr/share/man/man1/askbus.1.gz \
    /etc/systemd/user/sockets.target.wants/askbusd.socket; do
    [ ! -e "$f" ] && [ ! -L "$f" ] || fail "dpkg -r left $f"
  done
  [ -f /etc/askbus/askbusd.toml ] || fail "dpkg -r removed the conffile (only purge may)"
  dpkg -P askbusd
  [ ! -e /etc/askbus ] || fail "dpkg -P left /etc/askbus"
  dpkg -s askbusd >/dev/null 2>&1 && fail "askbusd still known to dpkg"
  true
}

for p in "${parts[@]}"; do "part_$p"; done
[ $deb = 0 ] || debian
step "all passed"
