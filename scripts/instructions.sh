#!/usr/bin/env bash
# Instructions per transaction of a txlab run, counted by callgrind in the worker threads only.
#
#   scripts/instructions.sh [BINARY] -- RUN_ARGS...
#   scripts/instructions.sh target/release/txlab -- -w tpcc --np -p silo --threads 1 --duration 3
#
# Unlike throughput on a shared machine, the count is repeatable (to about 0.3 % once a run
# executes more than ~50 000 transactions; shorter runs read a few percent high), so it can
# compare two builds of a CPU-side change one run each. It does not see cache misses or stalls:
# judge memory-side changes by interleaved throughput runs instead. Needs valgrind and python3.
# `--warmup 0` is added so that every executed transaction is counted; use one thread.
# `--no-prefault` too: under valgrind the leader's pre-faulting is slow enough to delay the end
# of the run several-fold, and it changes no instruction a worker executes. `--fair-sched=yes`:
# with valgrind's default unfair thread lock a spinning worker can starve the leader, whose
# wake-ups end the run, for minutes.
set -euo pipefail
bin=target/release/txlab
if [[ $# -gt 0 && $1 != -- ]]; then bin=$1; shift; fi
[[ ${1:-} == -- ]] && shift
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
[[ -x $bin ]] || { echo "instructions.sh: no executable at $bin (cargo build --release)" >&2; exit 2; }
out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
if ! valgrind --tool=callgrind --fair-sched=yes --toggle-collect='*worker_loop*' --callgrind-out-file="$out" \
    "$bin" run "$@" --warmup 0 --no-prefault >"$log" 2>&1; then
    echo "instructions.sh: the run failed:" >&2
    grep -v '^==' "$log" >&2
    exit 1
fi
python3 - "$out" "$log" <<'PY'
import re, sys
# Total instructions (collection is on inside the workers' loop only) over the transactions
# generated there (calls to `Generator::next`, from the call records). Where the compiler
# inlined `next` into the loop (YCSB's generator), there is no call record to count: the
# run's own commit count is used instead (the throughput line's, not the per-type lines'), and
# the figure is per committed transaction.
names, callee, total, txns = {}, "", None, 0
for line in open(sys.argv[1]):
    m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
    if m:
        kind, ident, name = m.groups()
        if name:
            names[ident] = name
        if kind == "cfn":
            callee = names.get(ident, "")
    elif line.startswith("calls=") and "Generator>::next" in callee:
        txns += int(line.split("=")[1].split()[0])
    elif line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
what = "transaction"
if total and not txns:
    commits = [int(m.group(1)) for m in re.finditer(r"txn/s +commits (\d+)", open(sys.argv[2]).read())]
    txns, what = sum(commits), "committed transaction"
if not total or not txns:
    sys.exit("instructions.sh: no transactions counted (did the run fail?)")
note = "" if txns >= 50_000 else "  (fewer than 50 000: reads high; run longer)"
print(f"{total / txns:.0f} instructions per {what} over {txns} {what}s{note}")
PY
