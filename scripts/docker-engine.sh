#!/usr/bin/env bash
# The Docker engine for the container tests (tests/containers).
#   scripts/docker-engine.sh start   installs docker.io (Debian) when dockerd is missing and starts a
#                                    daemon when none answers; records its pid in target/docker/dockerd.pid
#   scripts/docker-engine.sh stop    stops the daemon that `start` started, by that pid, and nothing else
# The daemon creates no bridge network and touches no iptables rules (--bridge=none --iptables=false):
# the containers use the host's network and bind their own loopback addresses (127.0.0.2, ...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
state=target/docker
pidfile="$state/dockerd.pid"
mkdir -p "$state"

engine_answers() { docker info >/dev/null 2>&1; }

start() {
  if engine_answers; then
    echo "docker engine: already running (not started by this script, will not be stopped by it)"
    return 0
  fi
  if ! command -v dockerd >/dev/null; then
    [ "$(id -u)" = 0 ] || { echo "docker engine: dockerd is missing and installing docker.io needs root" >&2; exit 1; }
    echo "docker engine: installing docker.io and debootstrap (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >"$state/apt.log" 2>&1 || {
      apt-get update -q >>"$state/apt.log" 2>&1
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >>"$state/apt.log" 2>&1
    } || { tail -20 "$state/apt.log" >&2; exit 1; }
  fi
  echo "docker engine: starting dockerd --bridge=none --iptables=false (log: $state/dockerd.log)"
  dockerd --bridge=none --iptables=false --ip6tables=false --pidfile "$state/dockerd.own.pid" \
    >"$state/dockerd.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 60); do
    if engine_answers; then echo "docker engine: ready (pid $(cat "$pidfile"))"; return 0; fi
    kill -0 "$(cat "$pidfile")" 2>/dev/null || break
    sleep 1
  done
  echo "docker engine: dockerd did not come up; its log:" >&2
  tail -20 "$state/dockerd.log" >&2
  stop
  exit 1
}

stop() {
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  rm -f "$pidfile"
  kill -0 "$pid" 2>/dev/null || return 0
  echo "docker engine: stopping dockerd (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
