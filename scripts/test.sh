#!/usr/bin/env bash
# The project's test command: sets up .venv from the lock, the pinned JavaScript peers (tests/js, npm ci) and the
# schemas tests validate against (.venv/schemas), lints, type-checks, and runs the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/bootstrap.sh")"
cd "$root"
"$root/scripts/npm_peers.sh"
"$root/scripts/test_schemas.sh"
"$py" -m ruff check .
"$py" -m mypy
# One pytest worker per CPU (pytest-xdist): most tests wait on real processes, so two workers on two cores take
# the suite from about 31 to 17 minutes. Each module stays on one worker (loadscope): its module fixtures (a
# proxy, a served library) start once. `-n 0` after this command runs the suite in one process.
exec "$py" -m pytest -n auto --dist loadscope "$@"
