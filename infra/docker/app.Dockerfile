# syntax=docker/dockerfile:1.7
# The project image: `lk` (every layer and the serving API), pyspark on a JRE, and Spark's
# connector jars. One image for the init Job, the archiver, the speed layer, the Kappa job, the
# serving API and, in k8s:// mode, the Spark executors. Build from the repository root:
#   make images        (or: docker build -f infra/docker/app.Dockerfile -t lambda-kappa/app:TAG .)

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---- the runtime: Python (as the lock requires) and a JRE 17 for Spark -------------------------
FROM ${PYTHON_IMAGE} AS runtime
# Debian's packages are not pinned to a version: the point release moves with security fixes,
# and an exact pin would stop building when the mirror drops the old one.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
 && rm -rf /var/lib/apt/lists/*

# ---- build: the locked environment and the connector jars --------------------------------------
FROM runtime AS build
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven \
 && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir uv==0.13.9
ENV UV_PROJECT_ENVIRONMENT=/opt/lk/venv \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never
WORKDIR /src
# Dependencies first (their layer survives a change of the project's own code), exactly as
# locked, without the dev group.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY core ./core
COPY lk ./lk
COPY infra ./infra
COPY batch_layer ./batch_layer
COPY speed_layer ./speed_layer
COPY serving ./serving
# The project as a wheel into the venv (not editable: the source tree stays in this stage).
RUN uv sync --frozen --no-dev --no-editable
# The jars, by the project's own code (infra/stack/artifacts.py): Maven resolves
# infra/maven/spark-connectors.pom.xml, then every jar pyspark already ships is dropped.
RUN LK_SPARK_JARS_DIR=/opt/lk/jars LK_CACHE_DIR=/tmp/lk-cache /opt/lk/venv/bin/python -c \
      "from core.settings import get_settings; from infra.stack.artifacts import spark_jars; print(spark_jars(get_settings()))" \
 && rm -rf /tmp/lk-cache

# ---- the image ---------------------------------------------------------------------------------
FROM runtime
RUN groupadd --system --gid 10001 lk \
 && useradd --system --uid 10001 --gid lk --home-dir /tmp --no-create-home --shell /usr/sbin/nologin lk
COPY --from=build /opt/lk/venv /opt/lk/venv
COPY --from=build /opt/lk/jars /opt/lk/jars
COPY --chmod=0755 infra/docker/spark-entrypoint.sh /opt/lk/bin/entrypoint.sh
ENV PATH=/opt/lk/venv/bin:$PATH \
    SPARK_HOME=/opt/lk/venv/lib/python3.11/site-packages/pyspark \
    LK_SPARK_JARS_DIR=/opt/lk/jars \
    LK_HOME=/tmp/lk \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /tmp
# tini as PID 1: SIGTERM reaches `lk`, and the JVM pyspark starts is reaped.
ENTRYPOINT ["tini", "--", "/opt/lk/bin/entrypoint.sh"]
CMD ["lk", "--help"]
