# syntax=docker/dockerfile:1.7
# Kafka (KRaft) without a Kafka image: a JRE 17 on Debian bookworm and the broker's jars,
# resolved by Maven from infra/maven/kafka-broker.pom.xml (the classpath `lk stack up` runs).
# No entrypoint conventions: the chart renders server.properties and runs the storage format
# and the broker (`java -cp '/opt/kafka/libs/*' kafka.Kafka /etc/kafka/server.properties`).
# The same image runs Kafka Connect (the chart's connect Deployment): the worker's classpath at
# /opt/connect/libs (infra/maven/kafka-connect.pom.xml) and its plugin.path /opt/connect/plugins:
# Debezium's Postgres connector (infra/maven/debezium-postgres.pom.xml) and the project's
# transform (infra/connect/smt, compiled here as `lk stack up` compiles it, infra/stack/artifacts.py).
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
 && apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY infra/maven/kafka-broker.pom.xml pom.xml
RUN mvn -B -q -f pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/kafka/libs -DincludeScope=runtime
COPY infra/maven/jmx-exporter.pom.xml jmx-exporter.pom.xml
RUN mvn -B -q -f jmx-exporter.pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/jmx-exporter -DincludeScope=runtime -Dmdep.stripVersion=true
COPY infra/maven/kafka-connect.pom.xml kafka-connect.pom.xml
RUN mvn -B -q -f kafka-connect.pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/connect/libs -DincludeScope=runtime
COPY infra/maven/debezium-postgres.pom.xml debezium-postgres.pom.xml
RUN mvn -B -q -f debezium-postgres.pom.xml dependency:copy-dependencies \
      -DoutputDirectory=/opt/connect/plugins/debezium-postgres -DincludeScope=runtime
COPY infra/connect/smt/src smt
RUN mkdir -p smt-classes /opt/connect/plugins/lk-profile-change \
 && find smt -name '*.java' > smt-sources.txt \
 && javac --release 17 -cp '/opt/connect/libs/*' -d smt-classes @smt-sources.txt \
 && cp -r smt/META-INF smt-classes/ \
 && jar --create --file /opt/connect/plugins/lk-profile-change/lk-profile-change.jar -C smt-classes .

# ---- the image ----------------------------------------------------------------------------------
FROM runtime
RUN groupadd --gid 1000 kafka \
 && useradd --uid 1000 --gid kafka --home-dir /var/lib/kafka --no-create-home \
      --shell /usr/sbin/nologin kafka \
 && mkdir -p /var/lib/kafka/data /etc/kafka \
 && chown -R 1000:1000 /var/lib/kafka
COPY --from=jars /opt/kafka/libs /opt/kafka/libs
COPY --from=jars /opt/jmx-exporter /opt/jmx-exporter
COPY --from=jars /opt/connect /opt/connect
USER 1000:1000
WORKDIR /var/lib/kafka
# The chart gives the full command; this default needs /etc/kafka/server.properties.
CMD ["java", "-cp", "/opt/kafka/libs/*", "kafka.Kafka", "/etc/kafka/server.properties"]
