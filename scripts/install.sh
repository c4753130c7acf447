#!/usr/bin/env bash
# Installs everything kipcheck needs on a fresh Debian machine; safe to run again.
# System tools (iptables, iproute2, a JDK, Maven, Go) from Debian when missing, the
# Python package with its test extras, the Kafka jars (by Maven, into
# ~/.cache/kipcheck), the seeded-bug agent (by Maven, same cache) and the pinned
# Toxiproxy server (by `go install`).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)  # builds the seeded-bug agent
command -v mvn >/dev/null || missing+=(maven)
command -v go >/dev/null || missing+=(golang-go)
command -v pgrep >/dev/null || missing+=(procps)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing system tools: ${missing[*]} (run this script as root to install them)" >&2
  fi
fi

python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'
python3 -m harness.kafka_dist ${KIPCHECK_KAFKA_VERSION:+"$KIPCHECK_KAFKA_VERSION"}
# the seeded-bug agent (tests/seeded_bugs, Byte Buddy) for `kipcheck selftest`; cached by source hash
python3 -m harness.seeded
if [ -f scripts/install-toxiproxy.sh ]; then
  bash scripts/install-toxiproxy.sh
fi
