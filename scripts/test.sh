#!/usr/bin/env bash
# Runs every test of the project: the Rust suite (unit, integration against the real daemon,
# conformance), then each client's suite against the same daemon binary.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every package's binaries: askbusd and askbus, and askbus-bench, which `askbus bench` (and
# tests/e2e/bench.rs) runs from beside askbus.
cargo build --workspace --bins
export ASKBUS_DAEMON="$PWD/target/debug/askbusd"
export ASKBUS_CLI="$PWD/target/debug/askbus"

echo "== Rust tests"
cargo test --workspace

if [ -d clients/python ]; then
  echo "== Python client tests"
  python3 -m unittest discover -s clients/python/tests -t clients/python -v
fi

if [ -d clients/node ]; then
  echo "== Node client tests"
  (cd clients/node && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
fi

# The four Node test packages are one npm workspace (tests/package.json, one lockfile): one
# install for all of them. After clients/node's: npm builds the askbus package that
# tests/node-reference links (its `prepare` runs clients/node's tsc).
(cd tests && { [ -d node_modules ] || npm ci --no-audit --no-fund; })

echo "== Node client against the reference (@google/gemini-cli-core 0.61.0)"
(cd tests/node-reference && npm test)

echo "== Client artifacts installed as a user would (cargo package, python3 -m build, npm pack)"
./scripts/package-test.sh

echo "== askbus web tests (Chromium via playwright-core)"
(cd tests/web && npm test)

echo "== MCP server tests (the official TypeScript MCP SDK as the client)"
(cd tests/mcp && npm test)

echo "== The real agents: Gemini CLI (offline, --fake-responses) and Claude Code (a local fake Messages API); askbus acp with the official ACP SDK as the editor"
(cd tests/agents && npm test)
