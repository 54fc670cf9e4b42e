# Shared by scripts/serve and scripts/test: make sure .venv exists and holds the project.
# Usage: source scripts/_venv.sh EXTRAS   (EXTRAS like "" or "dev,spark")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "tidelog: creating $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi
_extras="${1:-}"
_spec="$ROOT"
[ -n "$_extras" ] && _spec="$ROOT[$_extras]"
# Re-install only when pyproject.toml changed since the last install for these extras.
_stamp="$VENV/.tidelog-installed-${_extras:-base}"
if [ ! -f "$_stamp" ] || [ "$ROOT/pyproject.toml" -nt "$_stamp" ]; then
  echo "tidelog: installing the project into $VENV (extras: ${_extras:-none})" >&2
  "$VENV/bin/python" -m pip install --quiet -e "$_spec"
  touch "$_stamp"
fi
