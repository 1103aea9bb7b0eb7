#!/usr/bin/env bash
# Runs a command with another Node.js major first on PATH (from the npm package `node`, fetched by npx on first use),
# so that `npm`, its scripts and every process they start run on it: `scripts/with-node.sh 24 npm test`.
set -euo pipefail
major=$1
shift
binary=$(npx -y "node@${major}" -p process.execPath)
export PATH="$(dirname "$binary"):$PATH"
echo "$(node --version) from ${binary}"
exec "$@"
