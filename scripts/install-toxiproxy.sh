#!/usr/bin/env bash
# Builds the pinned Toxiproxy server into ~/.cache/kipcheck/bin/toxiproxy-server-<version>
# (harness.backends.toxiproxy.ensure_installed does the same lazily). Needs Go; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'from harness.backends.toxiproxy import ensure_installed; print(ensure_installed())'
