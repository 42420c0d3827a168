#!/usr/bin/env bash
# The main job: sets up .venv from the lock and runs the demo on the embedded example document.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$("$root/scripts/bootstrap.sh")"
cd "$root"
echo "== canonical form of examples/calculator-exfiltration.yaml (oatf normalize)"
exec "$py" -m oatf_cli.main normalize examples/calculator-exfiltration.yaml
