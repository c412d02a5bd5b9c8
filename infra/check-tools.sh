#!/usr/bin/env bash
# The system tools the local stack builds and runs with. Prints what is missing and how to get
# it; exits 1 if anything is missing. (.ci/run installs them on a fresh machine.)
missing=0
need() {  # need COMMAND HINT
  if ! command -v "$1" >/dev/null 2>&1; then echo "missing: $1 ($2)"; missing=1; fi
}
need java  "a JDK 17+ for Kafka and Spark: apt-get install openjdk-17-jdk-headless"
need mvn   "Maven, to fetch Kafka's and Spark's jars: apt-get install maven"
[ -n "${MINIO_BINARY:-}" ] || need go "Go, to build MinIO (or set MINIO_BINARY to a minio server binary)"
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1 \
   && [ -z "${LK_POSTGRES_BIN_DIR:-}" ]; then
  echo "missing: postgres (apt-get install postgresql)"; missing=1
fi
exit $missing
