# syntax=docker/dockerfile:1.7
# MinIO without a MinIO image (none published since 2025): `go install` of the pinned module
# version (core/settings.py minio_version, passed as MINIO_VERSION), static (CGO_ENABLED=0), on
# Debian bookworm. The chart gives the command (`minio server /data ...`). Also `mc`, MinIO's
# client, at the version that MinIO release itself requires (its go.mod: the module cache is
# shared): the chart's minio-users Job creates each component's user and policy with
# `mc admin`, the only client of MinIO's admin API. Build from the repository root:
#   make images   (or: docker build -f infra/docker/minio.Dockerfile -t lambda-kappa/minio:TAG .)
# GO_IMAGE: golang:*-bookworm, or `make cluster-images`' toolchain image (the base + the host's
# Go); GOMODCACHE/GOCACHE may be build volumes (the host's caches: a re-build compiles nothing).

ARG GO_IMAGE=golang:1.25-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

# ---- build --------------------------------------------------------------------------------------
FROM ${GO_IMAGE} AS build
ARG MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
ARG MC_VERSION=v0.0.0-20250313080218-cf909e1063a9
ARG GOMODCACHE=/go/pkg/mod
ARG GOCACHE=/root/.cache/go-build
ENV CGO_ENABLED=0 \
    GOBIN=/out \
    GOMODCACHE=${GOMODCACHE} \
    GOCACHE=${GOCACHE} \
    GOFLAGS="-buildvcs=false -modcacherw"
RUN go install "github.com/minio/minio@${MINIO_VERSION}" \
 && go install "github.com/minio/mc@${MC_VERSION}"

# ---- the image ----------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
RUN groupadd --gid 1000 minio \
 && useradd --uid 1000 --gid minio --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin minio \
 && mkdir -p /data \
 && chown 1000:1000 /data
COPY --from=build /out/minio /out/mc /usr/local/bin/
ENV HOME=/tmp
USER 1000:1000
WORKDIR /data
CMD ["minio", "server", "/data", "--address", ":9000", "--console-address", ":9001"]
