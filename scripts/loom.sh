#!/usr/bin/env bash
# Model-checks the queue lock (MOCC's MQL, src/protocols/common/mql.rs) with loom: every
# interleaving of a few threads within a preemption bound. Takes minutes; not part of CI's suite.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_mql "$@"
