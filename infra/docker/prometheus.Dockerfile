# syntax=docker/dockerfile:1.7
# Prometheus from Debian bookworm's own package, for the project's cluster only: the chart does
# not run a Prometheus (a user points their own at the chart's annotations or monitors), but the
# real-cluster tests and `make cluster-prometheus` need one that scrapes the release as a user's
# would (infra/prometheus.py gives its config and objects). The package's postinst makes
# a `prometheus` system user with any free id: create it first with a fixed one (a system id,
# under 1000, or the package's adduser refuses it), as the pod's securityContext names it. Build from the repository root:
#   make cluster-images   (or: docker build -f infra/docker/prometheus.Dockerfile -t lambda-kappa/prometheus:TAG .)
# BASE_IMAGE: debian:bookworm-slim, or the debootstrapped base of `make cluster-images`.

ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE}
# Only the server: the package recommends the node exporter, which has nothing to do here.
# hadolint ignore=DL3008
RUN groupadd --system --gid 990 prometheus \
 && useradd --system --uid 990 --gid prometheus --home-dir /prometheus --no-create-home \
      --shell /usr/sbin/nologin prometheus \
 && apt-get update \
 && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus \
 && chown 990:990 /prometheus
USER 990:990
WORKDIR /prometheus
CMD ["prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
