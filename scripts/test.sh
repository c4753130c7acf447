#!/usr/bin/env bash
# The test suite on a fresh machine: install, then every test (unit, property, Spark and
# live-cluster integration). Extra arguments go to pytest (e.g. -m "not cluster").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
exec python3 -m pytest -p no:cacheprovider "$@"
