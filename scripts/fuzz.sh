#!/usr/bin/env bash
# Coverage-guided fuzzing of the codec, frame parsing and ask_user validation (cargo-fuzz,
# libFuzzer), each target for SECONDS (default 60), with corpora seeded from proto/examples and
# the reference cases. Needs `cargo install cargo-fuzz`; runs on the stable toolchain through
# RUSTC_BOOTSTRAP=1. Crashes land in fuzz/artifacts/<target>/ and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
export RUSTC_BOOTSTRAP=1

python3 - <<'PY'
import json, os, pathlib, struct, hashlib
root = pathlib.Path("fuzz/corpus")
def put(target, data):
    d = root / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)
frames = []
for p in sorted(pathlib.Path("proto/examples").rglob("*.json")) if pathlib.Path("proto/examples").exists() else []:
    if p.name == "index.json":
        continue
    frames.append(json.dumps(json.loads(p.read_text()), separators=(",", ":")).encode())
cases = json.loads(pathlib.Path("clients/rust/tests/data/ask_user_reference_cases.json").read_text())
for c in cases[::7]:
    params = json.dumps(c["params"], separators=(",", ":")).encode()
    put("questions", params)
    frames.append(json.dumps({"type": "ask-user-request", "correlationId": "f", **c["params"]}, separators=(",", ":")).encode())
for f in frames:
    put("frames", f)
    put("codec", struct.pack(">I", len(f)) + f)
put("codec", b"".join(struct.pack(">I", len(f)) + f for f in frames[:8]))
PY

for target in codec frames questions; do
  echo "== fuzzing $target for ${seconds}s"
  log="$(mktemp)"
  # The run's own status decides (a status read after `| grep … || true` is grep's or true's).
  status=0
  cargo fuzz run "$target" "fuzz/corpus/$target" -- -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E "^(#[0-9]+.*DONE|Done|stat::number_of_executed_units|stat::new_units_added|==|SUMMARY|ERROR|thread|error)" "$log" || true
  if [ "$status" != 0 ]; then
    tail -n 30 "$log" >&2
    echo "fuzz target $target failed (status $status); see fuzz/artifacts/$target" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
done
