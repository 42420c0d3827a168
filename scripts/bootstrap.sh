#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment in .venv from requirements/lock.txt.
# Sourced by scripts/test.sh and scripts/demo.sh; prints the venv's python path on success.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
lock="$root/requirements/lock.txt"

find_python() {
    local candidates=(python3.12 python3.13 python3)
    local c
    for c in "${candidates[@]}"; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$c"; return 0
        fi
    done
    # pyenv keeps interpreters that are not on PATH unless selected.
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    for c in "$pyenv_root"/versions/3.12*/bin/python3 "$pyenv_root"/versions/3.13*/bin/python3; do
        if [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$c"; return 0
        fi
    done
    return 1
}

want="$(sha256sum "$lock" "$root/pyproject.toml" | sha256sum | cut -c1-16)"
# The project is installed editable, so pip compiles none of its modules; where PYTHONDONTWRITEBYTECODE is set
# (this CI, many containers) every interpreter (mitmdump, the monitor process, the library's loading children,
# each CLI call) would compile them from source again: about half its start-up CPU. Compiled here once instead,
# as a regular install does (`compileall` checks each source's mtime: an edited module is compiled again).
compile_project() {
    "$venv/bin/python" -m compileall -q -j 0 "$root/oatf" "$root/oatf_engine" "$root/addon" "$root/oatf_cli" \
        "$root/oatf_serve" "$root/attest_engine" "$root/testing" >/dev/null
}

if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.lock-hash" 2>/dev/null)" = "$want" ]; then
    compile_project
    echo "$venv/bin/python"; exit 0
fi

if ! py="$(find_python)"; then
    cat >&2 <<'MSG'
error: Python >= 3.12 is required (mitmproxy 12 needs it) and none was found.
Install one, for example:
  Debian/Ubuntu:  apt-get install python3.12 python3.12-venv
  pyenv:          pyenv install 3.12 && pyenv local 3.12
then run this command again.
MSG
    exit 3
fi
echo "setting up .venv with $py ($("$py" --version))" >&2
rm -rf "$venv"
"$py" -m venv "$venv"
log="$venv/install.log"
# The lock pins every package, so pip installs without resolving (--no-deps): fast and reproducible.
if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps -r "$lock" &&
       "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e "$root"; } >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -20 >&2
    echo "error: installing the locked dependencies failed (full log: $log)" >&2
    exit 4
fi
echo "$want" > "$venv/.lock-hash"
compile_project
echo "$venv/bin/python"
