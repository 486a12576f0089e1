#!/usr/bin/env bash
# Run the validation job with spark-submit, set up from the project's venv.
#
#   spark/submit.sh [spark-submit options] -- TOPIC [validate.py options]
#
# Sets JAVA_HOME (from the java on PATH) and PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON (the venv's
# python) unless already set, and ships headwater/ and headwater_spark/ to the executors as a zip
# (--py-files), so only the third-party packages must exist where executors run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

if [[ -z "${JAVA_HOME:-}" ]]; then
    JAVA_BIN="$(readlink -f "$(command -v java)")"
    JAVA_HOME="$(dirname "$(dirname "$JAVA_BIN")")"
    export JAVA_HOME
fi
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PY}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"

SUBMIT_ARGS=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    SUBMIT_ARGS+=("$1")
    shift
done
[[ "${1:-}" == "--" ]] && shift

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" - "$ROOT" "$WORK/headwater-src.zip" <<'EOF'
import sys
import zipfile
from pathlib import Path

root, target = Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
    for base in (root, root / "spark"):
        for path in sorted(base.glob("headwater/**/*.py")) + sorted(base.glob("headwater_spark/**/*.py")):
            archive.write(path, path.relative_to(base))
EOF

exec "$VENV/bin/spark-submit" --py-files "$WORK/headwater-src.zip" \
    ${SUBMIT_ARGS[@]+"${SUBMIT_ARGS[@]}"} "$ROOT/spark/headwater_spark/validate.py" "$@"
