#!/usr/bin/env bash
# Run the validation job with the cluster's spark-submit, shipping a packed Python environment.
#
#   spark/submit.sh [spark-submit options] -- TOPIC [validate options]
#
# spark-submit: $SPARK_HOME/bin/spark-submit when SPARK_HOME is set, else the first on PATH (the
# venv's pyspark one only when nothing else is there). The executors' Python environment is
# packed by `python -m headwater_spark.pack` (cached under $HEADWATER_PACK_DIR, default
# ~/.cache/headwater) and shipped with --archives; executors, and the driver in cluster mode, run
# ./environment/bin/python from it. Set HEADWATER_ENV_ARCHIVE to ship an archive built elsewhere
# (a path or URL spark-submit understands). Everything this script creates in /tmp is removed
# when it exits, whatever spark-submit's outcome; the exit code is spark-submit's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${HEADWATER_PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"

if [[ -n "${SPARK_HOME:-}" ]]; then
    SUBMIT="$SPARK_HOME/bin/spark-submit"
elif command -v spark-submit >/dev/null; then
    SUBMIT="$(command -v spark-submit)"
else
    SUBMIT="$(dirname "$PY")/spark-submit"
fi
[[ -x "$SUBMIT" ]] || { echo "submit.sh: no spark-submit (set SPARK_HOME)" >&2; exit 2; }

if [[ -z "${JAVA_HOME:-}" ]] && command -v java >/dev/null; then
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
    export JAVA_HOME
fi

SUBMIT_ARGS=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
    SUBMIT_ARGS+=("$1")
    shift
done
[[ "${1:-}" == "--" ]] && shift

WORK="$(mktemp -d "${TMPDIR:-/tmp}/headwater-submit.XXXXXX")"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT INT TERM

ARCHIVE="${HEADWATER_ENV_ARCHIVE:-}"
if [[ -z "$ARCHIVE" ]]; then
    ARCHIVE="$("$PY" -m headwater_spark.pack "${HEADWATER_PACK_DIR:-$HOME/.cache/headwater}/executor-env.tar.gz")"
fi

# The driver script: a tiny file, so the same command works in client and cluster mode.
cat > "$WORK/headwater_validate.py" <<'PYEOF'
import sys

from headwater_spark.validate import main

sys.exit(main())
PYEOF

# Not exec: the trap must still run after spark-submit returns.
set +e
PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}" "$SUBMIT" \
    --archives "$ARCHIVE#environment" \
    --conf spark.pyspark.python=./environment/bin/python \
    --conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python \
    ${SUBMIT_ARGS[@]+"${SUBMIT_ARGS[@]}"} "$WORK/headwater_validate.py" "$@"
status=$?
set -e
exit "$status"
