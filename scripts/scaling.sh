#!/usr/bin/env bash
# Every protocol's throughput against the thread count, on the workloads that show scaling
# limits: YCSB A, B and C (1 M records, the presets' Zipfian keys), TPC-C with one warehouse
# (every worker contends) and with a warehouse per worker (none need to), and SmallBank. Writes the results (JSON lines) and one HTML report with the figures.
#
#   scripts/scaling.sh [OUT_DIR]          (default: scaling/)
#   THREADS=1,2,4,8,16 DURATION=0.4 WARMUP=0.1 scripts/scaling.sh
#
# Made for a many-core machine: the default thread counts take about 6 minutes on 16 cores
# (each protocol loads each workload once, then measures every thread count for DURATION
# seconds). On fewer cores the larger counts are oversubscribed: the curves then show how a
# protocol degrades when its threads are descheduled, not how it scales. Interrupted, it
# resumes where it stopped (each sweep appends as it goes); remove OUT_DIR to start afresh.
# Pair it with `txlab run --breakdown` in a build with `--features shared-writes`, which counts
# the writes per transaction to lines other workers share: what these curves bend on.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-scaling}
threads=${THREADS:-1,2,4,8,16}
duration=${DURATION:-0.4}
warmup=${WARMUP:-0.1}
bin=target/release/txlab

if [[ ! $threads =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]]; then
    echo "scaling.sh: THREADS must be a comma-separated list of thread counts, not '$threads'" >&2
    exit 2
fi
cargo build --release --quiet
mkdir -p "$out"
common=(--duration "$duration" --warmup "$warmup" --repeat 1 --resume)

sweep() {
    local name=$1
    shift
    echo "== $name"
    "$bin" sweep "$@" "${common[@]}" --out "$out/$name.jsonl"
}

for preset in a b c; do
    sweep "ycsb-$preset" -w ycsb --preset "$preset" --records 1000000 --vary "threads=$threads"
done
sweep tpcc-1-warehouse -w tpcc --warehouses 1 --vary "threads=$threads"
# A warehouse per thread: as many warehouses as the largest count, each worker bound to its own
# (`--warehouse-choice home`, the default), so that no two workers share a home warehouse at
# any count; one load serves every count.
most=$(tr , '\n' <<<"$threads" | sort -n | tail -1)
sweep tpcc-warehouse-per-thread -w tpcc --warehouses "$most" --vary "threads=$threads"
sweep smallbank -w smallbank --vary "threads=$threads"

"$bin" report "$out"/*.jsonl --out "$out/report.html" \
    --title "Scaling: every protocol against the thread count ($(nproc) cores)"
echo "scaling.sh: results in $out/, the report in $out/report.html"
