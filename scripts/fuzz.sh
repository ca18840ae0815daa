#!/usr/bin/env bash
# Fuzzes lawsync's parsers with cargo-fuzz (libFuzzer): the targets in fuzz/fuzz_targets/
# (retry_after, search_body, detail_body, sqs_message, config_value), each for
# FUZZ_SECONDS, then one summary line per target: executions, seconds, new corpus units,
# crashes. Exits non-zero if any target crashed (a panic, a failed check, a timeout or an
# out-of-memory); the input is kept in fuzz/artifacts/<target>/ and printed here.
#
#   FUZZ_SECONDS    seconds per target (default 60)
#   FUZZ_TARGETS    targets to run, space-separated (default: all five)
#   FUZZ_SANITIZER  none (default) or address: see below
#
# Toolchain: only stable Rust exists on this project's machines, and no nightly can be
# fetched. Both ways were checked with rustc 1.95.0 and cargo-fuzz 0.13.2:
# - none (the default): cargo-fuzz instruments with stable flags only
#   (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-...), so plain stable rustc
#   builds it.
# - address: AddressSanitizer is -Zsanitizer=address, a nightly-only flag. RUSTC_BOOTSTRAP=1
#   (set below for this case only) lets stable rustc take it, and the ASan runtime
#   (librustc-stable_rt.asan.a) ships in stable's rust-std for x86_64-unknown-linux-gnu.
#   It ran 5-8 times fewer executions per second here than none.
# lawsync forbids unsafe code, so ASan would guard only the dependencies; what the targets
# look for (panics, failed checks, echoes of input, overflows, slow inputs) is found
# without it, and more of it in the same time. A build takes 10-20 minutes on 2 cores (the
# AWS SDK is instrumented too); later runs rebuild only what changed, but switching
# FUZZ_SANITIZER rebuilds it all.
#
# The seed corpus in fuzz/corpus/<target>/ is read only; what libFuzzer adds goes to
# .run/fuzz/corpus/<target>/ and is kept between runs. Logs: .run/fuzz/<target>.log.
# cargo-fuzz is installed with `cargo install` when missing (pinned version below).
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-retry_after search_body detail_body sqs_message config_value}
sanitizer=${FUZZ_SANITIZER:-none}
run_dir=.run/fuzz

if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install, a few minutes the first time)"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# Only the sanitizers need a -Z flag (see above).
if [ "$sanitizer" != none ]; then export RUSTC_BOOTSTRAP=1; fi
# Release code with debug assertions and overflow checks (fuzz/Cargo.toml's profile).
flags=(--fuzz-dir fuzz --sanitizer "$sanitizer")

echo "fuzz: building the targets (sanitizer: $sanitizer)"
cargo fuzz build "${flags[@]}"

mkdir -p "$run_dir"
summary=()
failed=0
for t in $targets; do
  mkdir -p "$run_dir/corpus/$t" "fuzz/artifacts/$t"
  log="$run_dir/$t.log"
  echo "fuzz: $t for ${seconds} s (log: $log)"
  start=$(date +%s)
  status=0
  cargo fuzz run "${flags[@]}" "$t" "$run_dir/corpus/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  took=$(($(date +%s) - start))
  # libFuzzer's own count of seconds fuzzed; the wall time when it stopped early.
  fuzzed=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  added=$(stat new_units_added)
  corpus=$(find "$run_dir/corpus/$t" -type f | wc -l)
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  crashes=0
  if [ "$status" -ne 0 ] || [ -n "$artifact" ]; then
    crashes=1
    failed=1
    echo "fuzz: $t CRASHED (exit $status); input: ${artifact:-see $log}" >&2
    grep -m 5 -E "panicked at|ERROR: |SUMMARY: " "$log" >&2 || true
  fi
  summary+=("$(printf '%-13s %12s execs %6s s %7s exec/s %5s new units %6s corpus %2s crashes' \
    "$t" "${execs:-?}" "${fuzzed:-$took}" "${rate:-?}" "${added:-?}" "$corpus" "$crashes")")
done

echo
echo "fuzz summary (sanitizer: $sanitizer, ${seconds} s per target)"
printf '  %s\n' "${summary[@]}"
exit "$failed"
