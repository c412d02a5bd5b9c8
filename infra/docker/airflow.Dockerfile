# syntax=docker/dockerfile:1.7
# The Airflow image: apache/airflow (slim, pinned to the version uv.lock resolves), the project
# with its locked dependencies, a JRE and the connector jars for the batch layer's Spark driver
# (LocalExecutor tasks run in the scheduler pod), and the DAGs baked in. Build from the repository
# root after the app image, whose jars it reuses:
#   make images   (or: docker build -f infra/docker/airflow.Dockerfile \
#                        --build-arg APP_IMAGE=lambda-kappa/app:TAG -t lambda-kappa/airflow:TAG .)

ARG APP_IMAGE=lambda-kappa/app:0.1.0
ARG AIRFLOW_IMAGE=apache/airflow:slim-3.3.2-python3.11
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${APP_IMAGE} AS app

# ---- the project as a wheel, and its dependencies exactly as locked ---------------------------
FROM ${PYTHON_IMAGE} AS requirements
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY core ./core
COPY lk ./lk
COPY infra ./infra
COPY batch_layer ./batch_layer
COPY speed_layer ./speed_layer
COPY serving ./serving
RUN uv export --frozen --no-dev --no-emit-project --format requirements-txt -o /out/requirements.txt \
 && uv build --wheel --out-dir /out/dist

# ---- the image ---------------------------------------------------------------------------------
FROM ${AIRFLOW_IMAGE}
# Numeric users (hadolint DL3066): 0 to install the JRE, then the image's own `airflow`, 50000.
USER 0
# default-jre-headless: the JRE of the image's Debian release (17 or 21; Spark 4 runs on both).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless \
 && rm -rf /var/lib/apt/lists/*
USER 50000
COPY --from=requirements /out /tmp/lk
# The lock's pins (with hashes) over the image's own packages: the DAGs run on exactly the
# versions the tests ran on; apache-airflow is the image's version, so it stays.
RUN pip install --no-cache-dir -r /tmp/lk/requirements.txt \
 && pip install --no-cache-dir --no-deps /tmp/lk/dist/*.whl \
 && rm -rf /tmp/lk
COPY --from=app /opt/lk/jars /opt/lk/jars
COPY --chown=50000:0 dags/ /opt/airflow/dags/
ENV LK_SPARK_JARS_DIR=/opt/lk/jars \
    LK_HOME=/tmp/lk
