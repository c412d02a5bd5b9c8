#!/usr/bin/env bash
# Entrypoint of the app image. Spark on Kubernetes starts executor pods from this image with the
# single argument `executor` and describes the executor in SPARK_* variables, the contract of
# Spark's own image entrypoint; any other arguments are a command (`lk serve ...`), run as is.
set -euo pipefail

if [[ "${1:-}" == "executor" ]]; then
  # SPARK_JAVA_OPT_0, _1, ...: the executor's JVM options, in their order.
  readarray -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
  # SPARK_CLASSPATH is spark.executor.extraClassPath: the connector jars in /opt/lk/jars.
  exec java "${java_opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
    -cp "${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "${SPARK_DRIVER_URL}" \
    --executor-id "${SPARK_EXECUTOR_ID}" \
    --cores "${SPARK_EXECUTOR_CORES}" \
    --app-id "${SPARK_APPLICATION_ID}" \
    --hostname "${SPARK_EXECUTOR_POD_IP}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME}"
fi

exec "$@"
