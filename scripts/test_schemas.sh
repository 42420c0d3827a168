#!/usr/bin/env bash
# Puts the schemas that tests validate against, shipped inside pinned source distributions
# (requirements/schemas.txt, hash-checked by pip), in .venv/schemas: for now the Jenkins xUnit plugin's
# junit-10.xsd from pytest's sdist. Only when it is missing or requirements/schemas.txt changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$root/requirements/schemas.txt"
build_pins="$root/requirements/schemas-build.txt"
out="$root/.venv/schemas"
stamp="$out/.lock-hash"
py="$root/.venv/bin/python"

want="$(cat "$pins" "$build_pins" | sha256sum | cut -c1-16)"
if [ -f "$out/junit-10.xsd" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
echo "fetching the pinned sources of the test schemas (requirements/schemas.txt)" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! PIP_CONSTRAINT="$build_pins" "$py" -m pip download --disable-pip-version-check --no-deps --no-binary :all: --require-hashes \
        -r "$pins" -d "$work" >"$work/log" 2>&1; then
    grep -v "^WARNING: Location" "$work/log" | tail -20 >&2
    echo "error: downloading requirements/schemas.txt failed" >&2
    exit 7
fi
mkdir -p "$out"
tar -xzf "$work"/pytest-*.tar.gz -C "$work" --wildcards '*/testing/example_scripts/junit-10.xsd'
cp "$work"/pytest-*/testing/example_scripts/junit-10.xsd "$out/junit-10.xsd"
echo "$want" > "$stamp"
