# syntax=docker/dockerfile:1.7
# Postgres 15 from Debian bookworm's own packages (binaries in /usr/lib/postgresql/15/bin, as in
# the official Debian-based image), user `postgres` with the official image's uid and gid 999.
# No entrypoint conventions: the chart runs its own start script (initdb on an empty volume,
# the init SQL, then `exec postgres`). Also Debian's prometheus-postgres-exporter (0.11.1),
# which the chart runs as a sidecar of the Postgres pod (metrics on 9187). Build from the repository root:
#   make images   (or: docker build -f infra/docker/postgres.Dockerfile -t lambda-kappa/postgres:TAG .)
# BASE_IMAGE: debian:bookworm-slim, or the debootstrapped base of `make cluster-images`.

ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE}
# The user first, with fixed ids (the package would pick any free system id); then
# postgresql-common told not to create a `main` cluster, which the volume would hide anyway.
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --no-create-home \
      --shell /bin/bash postgres \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-common \
 && sed -ri 's/#(create_main_cluster) .*$/\1 = false/' /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends postgresql-15 prometheus-postgres-exporter \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown -R 999:999 /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data/pgdata \
    LANG=C.UTF-8
USER 999:999
WORKDIR /var/lib/postgresql
CMD ["postgres", "--version"]
