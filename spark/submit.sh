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
LINK=""
cleanup() {
    rm -rf "$WORK"
    if [[ -n "$LINK" ]]; then rm -f "$LINK"; fi
}
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

# In client mode the driver runs here, with this Python; in cluster mode it runs in the cluster,
# from the shipped environment like the executors.
DRIVER_ARGS=(--conf "spark.pyspark.driver.python=$PY")
CLUSTER=0
for ((i = 0; i < ${#SUBMIT_ARGS[@]}; i++)); do
    if [[ "${SUBMIT_ARGS[$i]}" == "--deploy-mode" && "${SUBMIT_ARGS[$((i + 1))]:-}" == "cluster" ]] ||
        [[ "${SUBMIT_ARGS[$i]}" == "--deploy-mode=cluster" ]]; then
        DRIVER_ARGS=()
        CLUSTER=1
    fi
done
# A client-mode driver also starts Python workers itself (planning Python data sources) with
# spark.pyspark.python, relative to its working directory, where the archive is not unpacked:
# ./environment points at this Python's environment for as long as the job runs.
if [[ "$CLUSTER" == 0 && ! -e environment ]]; then
    ln -s "$(cd "$(dirname "$PY")/.." && pwd)" environment
    LINK="$PWD/environment"
fi

# A pip-installed spark-submit finds its SPARK_HOME by importing pyspark with this Python.
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"

# Not exec: the trap must still run after spark-submit returns.
set +e
"$SUBMIT" \
    --archives "$ARCHIVE#environment" \
    --conf spark.pyspark.python=./environment/bin/python \
    ${DRIVER_ARGS[@]+"${DRIVER_ARGS[@]}"} \
    ${SUBMIT_ARGS[@]+"${SUBMIT_ARGS[@]}"} "$WORK/headwater_validate.py" "$@"
status=$?
set -e
exit "$status"
