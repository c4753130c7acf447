#!/usr/bin/env bash
# The nightly form of the suite: every test, the long forms too (`-m long`: the second window of
# the seeded-bug matrix, the real Kafka bugs replayed, every profile line read in its jars, the
# main job beside Docker, the container backend's run, the runs on ssh hosts, 3.9 and a newer
# release ...), then the per-module time budget. Hours, not minutes; CI runs
# scripts/test.sh, which leaves these out. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
exec python3 -m pytest -p no:cacheprovider -m "long or not long" -rfE --durations=30 "$@"
