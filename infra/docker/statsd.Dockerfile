# syntax=docker/dockerfile:1.7
# Prometheus's statsd_exporter (Airflow's StatsD metrics in Prometheus's format, for the
# chart's `<release>-statsd-exporter`) without the upstream image: `go install` of the pinned
# module version, static (CGO_ENABLED=0), on Debian bookworm, as `nobody` (65534). The chart
# gives the command and the mapping config. Build from the repository root:
#   make images   (or: docker build -f infra/docker/statsd.Dockerfile -t lambda-kappa/statsd:TAG .)
# GO_IMAGE: golang:*-bookworm, or `make cluster-images`' toolchain image (the base + the host's
# Go); GOMODCACHE/GOCACHE may be build volumes (the host's caches: a re-build compiles nothing).

ARG GO_IMAGE=golang:1.25-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

# ---- build --------------------------------------------------------------------------------------
FROM ${GO_IMAGE} AS build
# The newest release whose go.mod the toolchain here (Go 1.25+) builds.
ARG STATSD_EXPORTER_VERSION=v0.31.0
ARG GOMODCACHE=/go/pkg/mod
ARG GOCACHE=/root/.cache/go-build
ENV CGO_ENABLED=0 \
    GOBIN=/out \
    GOMODCACHE=${GOMODCACHE} \
    GOCACHE=${GOCACHE} \
    GOFLAGS="-buildvcs=false -modcacherw"
# -s -w: no symbol tables (a third off the binary); the version for `statsd_exporter --version`.
RUN go install -ldflags "-s -w -X github.com/prometheus/common/version.Version=${STATSD_EXPORTER_VERSION#v}" \
      "github.com/prometheus/statsd_exporter@${STATSD_EXPORTER_VERSION}"

# ---- the image ----------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
COPY --from=build /out/statsd_exporter /usr/local/bin/statsd_exporter
USER 65534:65534
WORKDIR /tmp
# The chart gives the full command (UDP 9125 in, metrics on 9102).
CMD ["statsd_exporter", "--version"]
