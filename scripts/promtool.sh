#!/usr/bin/env bash
# Runs Prometheus's promtool (from Debian's `prometheus` package, unpacked without installing it, cached under
# .cache/promtool) with the given arguments. `npm run ops:check` uses it to check and unit-test ops/prometheus.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/promtool"
promtool="$cache/usr/bin/promtool"
if [ ! -x "$promtool" ]; then
  mkdir -p "$cache"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && apt-get download prometheus >/dev/null 2>&1); then
    # A fresh machine may have no package lists yet.
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    $sudo apt-get update -qq
    (cd "$work" && apt-get download prometheus)
  fi
  dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
  mkdir -p "$cache/usr/bin"
  cp "$work/x/usr/bin/promtool" "$promtool"
fi
exec "$promtool" "$@"
