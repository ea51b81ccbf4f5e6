#!/usr/bin/env bash
# The client crate `askbus` (clients/rust) stays light for the Rust agents that depend on it:
# each feature combination builds on its own (feature unification in the workspace would hide
# a missing gate), and its dependency count stays under a ceiling, so a new dependency is a
# decision. `cargo check` only: about a minute on a warm cache.
set -euo pipefail
cd "$(dirname "$0")/.."

# Crates `cargo add askbus` compiles (normal dependencies, the crate itself included), at most.
MAX_DEFAULT=40        # client: tokio, tokio-util, futures-util, libc, serde, serde_json, ...
MAX_NO_DEFAULT=24     # protocol and ask_user rules: serde, serde_json, bytes, thiserror
# The `shown` feature (shownSha256) adds sha2 and its 8 RustCrypto crates; it is off by
# default, so neither count above includes it.

count() {
  cargo tree -p askbus -e normal --prefix none "$@" | sed 's/ (\*)$//' | sort -u | wc -l
}

fail=0
# `fast` (the daemon's fast paths, doc-hidden) is off by default and adds no crate of its own
# (memchr comes with serde_json); it must build alone and beside the client.
for features in "--no-default-features" "--no-default-features --features codec" "--no-default-features --features shown" "--no-default-features --features fast" "--features fast" ""; do
  echo "client-crate: cargo check -p askbus ${features:-(default features)}"
  # shellcheck disable=SC2086
  cargo check -q -p askbus --lib $features || fail=1
done

n_default=$(count)
n_bare=$(count --no-default-features)
echo "client-crate: askbus compiles $n_default crates (default features), $n_bare without"
if [ "$n_default" -gt "$MAX_DEFAULT" ]; then
  echo "client-crate: $n_default crates with default features, more than $MAX_DEFAULT" >&2
  cargo tree -p askbus -e normal >&2
  fail=1
fi
if [ "$n_bare" -gt "$MAX_NO_DEFAULT" ]; then
  echo "client-crate: $n_bare crates without default features, more than $MAX_NO_DEFAULT" >&2
  cargo tree -p askbus -e normal --no-default-features >&2
  fail=1
fi
# The protocol alone must not pull an async runtime.
tree=$(cargo tree -p askbus -e normal --no-default-features --prefix none)
if grep -q '^tokio ' <<<"$tree"; then
  echo "client-crate: tokio is a dependency without the client feature" >&2
  fail=1
fi
exit $fail
