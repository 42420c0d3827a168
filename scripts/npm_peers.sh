#!/usr/bin/env bash
# Installs the pinned JavaScript peers of the e2e tests (tests/js: package.json + package-lock.json) with
# `npm ci`, only when tests/js/node_modules is missing or the lock changed since the last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
js="$root/tests/js"
stamp="$js/node_modules/.lock-hash"

want="$(sha256sum "$js/package.json" "$js/package-lock.json" | sha256sum | cut -c1-16)"
if [ -d "$js/node_modules" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! node -e 'process.exit(+process.versions.node.split(".")[0] < 20 ? 1 : 0)' 2>/dev/null; then
    cat >&2 <<'MSG'
error: Node.js >= 20 with npm is required: the e2e tests run third-party JavaScript peers (tests/js).
Install it, for example:
  Debian/Ubuntu:  apt-get install nodejs npm
then run this command again.
MSG
    exit 5
fi
echo "installing the pinned JavaScript peers (npm ci in tests/js)" >&2
log="$(mktemp)"
if ! npm ci --no-audit --no-fund --prefix "$js" >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "error: npm ci in tests/js failed (full log: $log)" >&2
    exit 6
fi
rm -f "$log"
echo "$want" > "$stamp"
