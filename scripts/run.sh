#!/usr/bin/env bash
# The main job on a fresh machine: install, then `kipcheck run` on the embedded default cluster.
# Extra arguments go to `kipcheck run` (e.g. --faults partition,latency,kill --seed 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec kipcheck run --duration 60 --seed 7 "$@"
