#!/usr/bin/env bash
# Builds the Debian package into target/debian/: the release binaries, then the man pages and
# shell completions they generate (from the same clap definitions that parse their command
# lines), then `cargo deb --no-build` with [package.metadata.deb] of Cargo.toml. Extra
# arguments go to cargo deb. Needs cargo-deb (`cargo install cargo-deb --locked`).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-deb >/dev/null 2>&1 || {
  echo "deb.sh: cargo-deb not found: cargo install cargo-deb --locked" >&2
  exit 1
}
cargo build --release --locked --bins
bin="${CARGO_TARGET_DIR:-target}/release"
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin/askbus" man --dir "$assets/man"
"$bin/askbusd" --man >"$assets/man/askbusd.1"
"$bin/askbus" completions bash >"$assets/completions/askbus"
"$bin/askbus" completions zsh >"$assets/completions/_askbus"
"$bin/askbus" completions fish >"$assets/completions/askbus.fish"
cargo deb -p askbus-dist --no-build "$@"
