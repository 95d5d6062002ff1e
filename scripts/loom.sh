#!/usr/bin/env bash
# Model-checks with loom, every interleaving of a few threads within a preemption bound: the queue
# lock (MOCC's MQL, src/protocols/mocc/mql.rs) and the log epochs' in-flight handshake
# (src/durability/log/flight.rs). Takes minutes; not part of CI's suite.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_mql --test loom_flight "$@"
