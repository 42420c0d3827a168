#!/usr/bin/env bash
# The main job: sets up .venv from the lock, then runs the self-contained demo (demo/run.py): a poisoned MCP
# server, mitmdump with the OATF addon, a naive and a careful agent; prints the verdict table and reports.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/bootstrap.sh")"
cd "$root"
exec "$py" -m demo.run
