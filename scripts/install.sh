#!/usr/bin/env bash
# Installs everything kipcheck needs on a fresh Debian machine; safe to run again.
# System tools (iptables, iproute2, a JDK, Maven, Go, libfaketime) from Debian when missing, the
# Python package with its test extras, the Kafka jars (by Maven, into
# ~/.cache/kipcheck), the seeded-bug agent (by Maven, same cache) and the pinned
# Toxiproxy server (by `go install`).
# With --test (scripts/test.sh) also what only the tests use: Debian's docker.io, for the
# test that runs kipcheck beside dockerd, and Debian's openssh-server, whose sshd the ssh
# backend's tests start in network namespaces as remote hosts (both installed without starting
# their service).
# With --allure (implied by --test) the Allure command line (npm allure-commandline, into
# ~/.cache/kipcheck/allure, on PATH as `allure` if none is) and Debian's chromium, which
# render and show the Allure results of `pytest --alluredir` and `kipcheck run` (docs/pytest.md);
# tests/test_report_browser.py also opens the HTML report in that chromium (docs/report.md).
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
for_allure=0
for arg in "$@"; do
  case "$arg" in
    --test) for_tests=1; for_allure=1 ;;
    --allure) for_allure=1 ;;
    *) echo "usage: $0 [--test] [--allure]" >&2; exit 2 ;;
  esac
done

# One line per step, with the seconds so far: on a fresh machine Maven and `go install` take
# minutes and print nothing of their own here.
started=$SECONDS
steps=5
[ $for_allure = 1 ] && steps=6
step() { echo "[$1/$steps] $2 (${3:-$((SECONDS - started))} s so far)"; }

missing=()
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)  # builds the seeded-bug agent
command -v mvn >/dev/null || missing+=(maven)
command -v go >/dev/null || missing+=(golang-go)
command -v pgrep >/dev/null || missing+=(procps)
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(libfaketime)  # clock faults (faults/clock.py)
missing_for_tests=()
[ $for_tests = 1 ] && ! command -v dockerd >/dev/null && missing_for_tests+=(docker.io)
[ $for_tests = 1 ] && [ ! -x /usr/sbin/sshd ] && missing_for_tests+=(openssh-server)
[ $for_allure = 1 ] && ! command -v chromium >/dev/null && missing+=(chromium)
[ $for_allure = 1 ] && ! command -v npm >/dev/null && missing+=(npm)

# Debian starts a package's service on install; dockerd in the host's network namespace would set
# the FORWARD policy to DROP under every running cluster, and the test starts its own dockerd.
install_without_starting() {
  local policy=/usr/sbin/policy-rc.d added=0 rc=0
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy && added=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
  [ $added = 1 ] && rm -f $policy
  return $rc
}

wanted="${missing[*]}${missing_for_tests[*]:+ ${missing_for_tests[*]}}"
step 1 "system tools from Debian: ${wanted:-none missing}"
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_for_tests[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]} ${missing_for_tests[*]}"
    apt-get update -qq
    [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    [ ${#missing_for_tests[@]} -eq 0 ] || install_without_starting "${missing_for_tests[@]}"
  else
    echo "missing system tools: ${missing[*]} ${missing_for_tests[*]} (run this script as root to install them)" >&2
  fi
fi

step 2 "the kipcheck Python package and its test extras (pip)"
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'
step 3 "the Kafka ${KIPCHECK_KAFKA_VERSION:-default} jars from Maven Central (a few minutes the first time)"
python3 -m kipcheck.harness.backends.kafka_dist ${KIPCHECK_KAFKA_VERSION:+"$KIPCHECK_KAFKA_VERSION"}
# the seeded-bug agent (harness/backends/seeded_bugs, Byte Buddy) for `kipcheck selftest`; cached by source hash
step 4 "the seeded-bug agent, built by Maven once per source change"
python3 -m kipcheck.harness.backends.seeded
python3 -m kipcheck.harness.backends.tiered  # and the remote storage manager for --tiered (harness/backends/remote_storage), the same way
step 5 "the pinned Toxiproxy server (go install, a minute or two the first time)"
if [ -f scripts/install-toxiproxy.sh ]; then
  bash scripts/install-toxiproxy.sh
fi

if [ $for_allure = 1 ]; then
  step 6 "the Allure command line (npm)"
  allure_prefix="${KIPCHECK_CACHE:-$HOME/.cache/kipcheck}/allure"
  if [ ! -x "$allure_prefix/node_modules/.bin/allure" ]; then
    echo "installing the Allure command line (npm allure-commandline) into $allure_prefix"
    npm install --silent --no-audit --no-fund --prefix "$allure_prefix" allure-commandline@2 >/dev/null
  fi
  if ! command -v allure >/dev/null && [ -w /usr/local/bin ]; then
    ln -sf "$allure_prefix/node_modules/.bin/allure" /usr/local/bin/allure
  fi
fi
echo "kipcheck installed in $((SECONDS - started)) s"
