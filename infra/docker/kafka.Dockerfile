# syntax=docker/dockerfile:1.7
# Kafka (KRaft) without a Kafka image: a JRE 17 on Debian bookworm and the broker's jars,
# resolved by Maven from infra/maven/kafka-broker.pom.xml (the classpath `lk stack up` runs).
# No entrypoint conventions: the chart renders server.properties and runs the storage format
# and the broker (`java -cp '/opt/kafka/libs/*' kafka.Kafka /etc/kafka/server.properties`).
# Also Prometheus's JMX exporter javaagent (infra/maven/jmx-exporter.pom.xml), apart from the
# broker's classpath at /opt/jmx-exporter/jmx_prometheus_javaagent.jar: the chart adds
# `-javaagent:` with its config when metrics are on.
# Build from the repository root:
#   make images   (or: docker build -f infra/docker/kafka.Dockerfile -t lambda-kappa/kafka:TAG .)
# BASE_IMAGE: debian:bookworm-slim, or the debootstrapped base of `make cluster-images`.

ARG BASE_IMAGE=debian:bookworm-slim

# ---- the runtime: a JRE 17 ----------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
# Debian's packages are not pinned to a version (the point release moves with security fixes).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

# ---- the jars, by Maven (its repository, /root/.m2, may be a build volume) -----------------------
FROM runtime AS jars
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY infra/maven/kafka-broker.pom.xml pom.xml
RUN mvn -B -q -f pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/kafka/libs -DincludeScope=runtime
COPY infra/maven/jmx-exporter.pom.xml jmx-exporter.pom.xml
RUN mvn -B -q -f jmx-exporter.pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/jmx-exporter -DincludeScope=runtime -Dmdep.stripVersion=true

# ---- the image ----------------------------------------------------------------------------------
FROM runtime
RUN groupadd --gid 1000 kafka \
 && useradd --uid 1000 --gid kafka --home-dir /var/lib/kafka --no-create-home \
      --shell /usr/sbin/nologin kafka \
 && mkdir -p /var/lib/kafka/data /etc/kafka \
 && chown -R 1000:1000 /var/lib/kafka
COPY --from=jars /opt/kafka/libs /opt/kafka/libs
COPY --from=jars /opt/jmx-exporter /opt/jmx-exporter
USER 1000:1000
WORKDIR /var/lib/kafka
# The chart gives the full command; this default needs /etc/kafka/server.properties.
CMD ["java", "-cp", "/opt/kafka/libs/*", "kafka.Kafka", "/etc/kafka/server.properties"]
