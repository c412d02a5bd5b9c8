#!/usr/bin/env bash
# What a fresh Debian/Ubuntu machine lacks to run the project, installed: Debian's packages
# first (as root; as another user it prints the one `sudo` line to run and exits 1), then uv.
# `make setup` (so `make demo` and `make test`) runs it, and `.ci/run` with --cluster.
#
#   infra/bootstrap.sh            # the local stack, its tests and the demo
#   infra/bootstrap.sh --cluster  # also the real cluster's tools (make test-k8s, lk cluster)
#
# Everything present: a few `command -v`, no network, no package manager (milliseconds).
#
# uv goes into a virtual environment of its own under the cache folder (LK_UV_DIR, default
# $LK_CACHE_DIR/uv, else .cache/uv here), from PyPI with that environment's pip: Debian's
# Python is "externally managed" (PEP 668), so `pip install uv` is refused there, and a venv
# leaves the system's packages alone. The Makefile finds it there when `uv` is not on PATH.
set -euo pipefail

cluster=0
for arg in "$@"; do
  case "$arg" in
    --cluster) cluster=1 ;;
    *) echo "usage: $0 [--cluster]" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
uv_dir="${LK_UV_DIR:-${LK_CACHE_DIR:-$root/.cache}/uv}"

have() { command -v "$1" >/dev/null 2>&1; }

# Debian's packages for what is missing, each tool with the package that provides it.
pkgs=()
need() {  # need COMMAND PACKAGE...
  local tool=$1; shift
  have "$tool" || pkgs+=("$@")
}
need java openjdk-17-jdk-headless  # Kafka, Kafka Connect and Spark
need javac openjdk-17-jdk-headless # the Connect transform (infra/connect/smt)
need jar openjdk-17-jdk-headless
need mvn maven                     # Kafka's, Connect's, Debezium's and Spark's jars (Maven Central)
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! have postgres \
   && [ -z "${LK_POSTGRES_BIN_DIR:-}" ]; then
  pkgs+=(postgresql)               # the serving store and Airflow's metadata
fi
need chromium chromium             # the tests that click through the Airflow UI and the report
# Go builds MinIO (and the cluster's binaries): Go from go.dev in /usr/local/go if there (the
# caller puts it on PATH), else Debian's.
if [ -z "${MINIO_BINARY:-}" ] && ! have go && [ ! -x /usr/local/go/bin/go ]; then
  pkgs+=(golang-go)
fi
if [ "$cluster" = 1 ]; then
  # The real cluster of `make test-k8s` (lk cluster up) and its images (podman, debootstrap).
  need containerd containerd
  need runc runc
  need podman podman
  need buildah buildah
  need debootstrap debootstrap
  need iptables iptables
  need nft nftables                  # reads the NetworkPolicy agent's table (lk cluster up)
  need conntrack conntrack
  need nsenter util-linux
  [ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
  [ -x /bin/busybox ] || pkgs+=(busybox-static)  # the smoke test's image (lk cluster smoke)
  need gcc gcc libc6-dev                          # the pause image, gcc -static
fi
# uv's own environment needs Python's venv module (Debian ships it apart, as python3-venv).
if ! have uv && [ ! -x "$uv_dir/bin/uv" ] && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  pkgs+=(python3-venv)
fi

if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: Debian packages are missing; install them with this line, then run make again:" >&2
    echo "  sudo sh -c 'apt-get update && apt-get install -y ${pkgs[*]}'" >&2
    exit 1
  fi
  echo "bootstrap: installing Debian's ${pkgs[*]} (once) ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

if [ -z "${MINIO_BINARY:-}" ] && ! have go; then  # /usr/local/go/bin/go, off PATH
  echo "bootstrap: Go is in /usr/local/go but not on PATH: export PATH=/usr/local/go/bin:\$PATH" >&2
  exit 1
fi

if ! have uv && [ ! -x "$uv_dir/bin/uv" ]; then
  echo "bootstrap: installing uv into $uv_dir (once) ..."
  rm -rf "$uv_dir"  # a half-made one from an interrupted run
  python3 -m venv "$uv_dir"
  "$uv_dir/bin/python" -m pip install --quiet --disable-pip-version-check uv
  "$uv_dir/bin/uv" --version
fi
