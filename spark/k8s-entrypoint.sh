#!/usr/bin/env bash
# Entrypoint of the headwater-spark image: Spark's Kubernetes driver and executor pods, or any
# command (`headwater validate ...` in docker-compose, spark-submit in the CronJob).
#
# In cluster mode Spark starts driver and executor pods from this image with the first argument
# `driver` or `executor` and the rest in SPARK_* variables, as Apache Spark's own image does
# (resource-managers/kubernetes/docker/.../entrypoint.sh); pyspark's wheel ships the jars but not
# that script, so the same two launches are written here.
set -euo pipefail

SPARK_HOME="${SPARK_HOME:-$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
export SPARK_HOME

# SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...: JVM options Spark passes to the executor, in order.
java_opts=()
while IFS= read -r line; do
    java_opts+=("${line#*=}")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n)

case "${1:-}" in
    driver)
        shift
        exec "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
            --deploy-mode client "$@"
        ;;
    executor)
        shift
        exec java "${java_opts[@]}" \
            -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
            -cp "$SPARK_HOME/jars/*" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "${SPARK_DRIVER_URL}" \
            --executor-id "${SPARK_EXECUTOR_ID}" \
            --cores "${SPARK_EXECUTOR_CORES}" \
            --app-id "${SPARK_APPLICATION_ID}" \
            --hostname "${SPARK_EXECUTOR_POD_IP}" \
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID}" \
            --podName "${SPARK_EXECUTOR_POD_NAME}"
        ;;
    *)
        exec "$@"
        ;;
esac
