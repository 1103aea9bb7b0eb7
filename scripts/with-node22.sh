#!/usr/bin/env bash
# Runs a command with Node.js 22 first on PATH (from the npm package `node`, fetched by npx on first use), so that
# `npm`, its scripts and every process they start run on 22: `scripts/with-node22.sh npm test`.
set -euo pipefail
node22=$(npx -y node@22 -p process.execPath)
export PATH="$(dirname "$node22"):$PATH"
echo "$(node --version) from ${node22}"
exec "$@"
