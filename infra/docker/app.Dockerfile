# syntax=docker/dockerfile:1.7
# The project image: `lk` (every layer and the serving API), Airflow (locked in uv.lock), pyspark
# on a JRE, and Spark's connector jars. One image for the init Job, the archiver, the speed layer,
# the Kappa job, the serving API, the `helm test` pod and, in k8s:// mode, the Spark executors;
# the Airflow image adds the DAGs on top. Build from the repository root:
#   make images        (or: docker build -f infra/docker/app.Dockerfile -t lambda-kappa/app:TAG .)
# PYTHON_IMAGE is any Debian bookworm with python3.11, pip and `python` on PATH: the official
# slim image, or the debootstrapped base of `make cluster-images` (infra/images).

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---- the runtime: Python (as the lock requires) and a JRE 17 for Spark -------------------------
FROM ${PYTHON_IMAGE} AS runtime
# Debian's packages are not pinned to a version: the point release moves with security fixes,
# and an exact pin would stop building when the mirror drops the old one.
# procps: `pgrep`, with which the KubernetesPodOperator stops its XCom sidecar (this image,
# the chart's `xcom_sidecar_container_image`) once it has read a step's result.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/*

# ---- deps: the locked environment, without the project ---------------------------------------
FROM runtime AS deps
RUN pip install --no-cache-dir uv==0.13.9
# UV_NATIVE_TLS: the system's trust store, like pip and Maven (a TLS-inspecting proxy's CA added
# there is then trusted). The caches (/root/.cache/uv, /root/.cache/lk/m2) stay in the build
# stages; `make cluster-images` mounts them from the host, so a re-build downloads nothing.
ENV UV_PROJECT_ENVIRONMENT=/opt/lk/venv \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_NATIVE_TLS=1
WORKDIR /src
# Exactly as locked, without the dev group. Its own stage and layer: the image copies it
# unchanged while uv.lock is, whatever changes in the project's code or its README (the
# project's metadata names a readme; an empty one stands in, the image needs no long
# description: a README edit rebuilt this 2 GB layer, minutes of CPU on 2 cores).
COPY pyproject.toml uv.lock ./
RUN touch README.md && uv sync --frozen --no-dev --no-install-project

# ---- build: the project and the connector jars ---------------------------------------------------
FROM deps AS build
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven \
 && rm -rf /var/lib/apt/lists/*
COPY core ./core
COPY lk ./lk
COPY infra ./infra
COPY batch_layer ./batch_layer
COPY stream_engine ./stream_engine
COPY speed_layer ./speed_layer
COPY kappa ./kappa
COPY quality ./quality
COPY serving ./serving
COPY comparison ./comparison
# The project (not editable), built into /out/site for the venv's site-packages, its `lk`
# script into /out/bin; then the jars, by the project's own code (infra/stack/artifacts.py):
# Maven resolves infra/maven/spark-connectors.pom.xml, then every jar pyspark already ships is
# dropped. (No clean-up of the Maven repository: this stage is not shipped; it may be a mount.)
RUN uv pip install --python /opt/lk/venv/bin/python --no-deps --target /out/site . \
 && mv /out/site/bin /out/bin \
 && LK_SPARK_JARS_DIR=/opt/lk/jars LK_CACHE_DIR=/root/.cache/lk /opt/lk/venv/bin/python -c \
      "from core.settings import get_settings; from infra.stack.artifacts import spark_jars; print(spark_jars(get_settings()))"

# ---- the image ---------------------------------------------------------------------------------
FROM runtime
RUN groupadd --system --gid 10001 lk \
 && useradd --system --uid 10001 --gid lk --home-dir /tmp --no-create-home --shell /usr/sbin/nologin lk
# Largest and stablest first: the dependencies (about 2 GB), the jars, then the project.
COPY --from=deps /opt/lk/venv /opt/lk/venv
COPY --from=build /opt/lk/jars /opt/lk/jars
COPY --from=build /out/site /opt/lk/venv/lib/python3.11/site-packages
COPY --from=build /out/bin /opt/lk/venv/bin
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
