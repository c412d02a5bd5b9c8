"""The project's images built with podman, without Docker or any container registry, and
imported into a containerd (the real cluster's, `lk cluster up`).

- `build_all(settings, tag)`: the debootstrapped Debian base (infra/images/base.py, cached), a Go
  toolchain image (the base + the host's /usr/local/go), then app, airflow, kafka, minio,
  postgres and statsd (Prometheus's statsd_exporter) from the same infra/docker/*.Dockerfile
  that `make images` builds with Docker from public bases (build arguments select the base);
  and prometheus (Debian's), not the chart's: the one the cluster's tests scrape it with.
  Caches are podman build volumes under the cache folder: uv's, Maven's (`<cache>/m2`, shared
  with `lk stack up`) and Go's (`<cache>/go/{mod,build}`, at the same paths, so the stack's
  MinIO build is a cache hit).
- `load_into_containerd(socket, images)`: `podman save -m --format docker-archive <images> |
  ctr -n k8s.io images import -` (shared layers once), then checks the names in `ctr images ls`.

Images are named `docker.io/lambda-kappa/<component>:<tag>`: the chart renders
`lambda-kappa/<component>:<tag>`, which containerd's CRI resolves to exactly that name.
Run it as `python -m infra.images` (`make cluster-images`, `make cluster-load`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.settings import Settings
from infra.cluster import paths
from infra.images.base import build_base, image_exists
from infra.images.errors import ImagesError, last_line

__all__ = [
    "COMPONENTS",
    "BuildPlan",
    "ImagesError",
    "build_all",
    "build_plans",
    "default_socket",
    "image_name",
    "image_tag",
    "load_into_containerd",
    "podman_build_command",
]

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "infra" / "docker"
REGISTRY = "docker.io"
PROJECT = "lambda-kappa"
COMPONENTS = ("app", "airflow", "kafka", "minio", "postgres", "statsd", "prometheus")
GO_REPOSITORY = "localhost/lambda-kappa/go"
HOST_GOROOT = Path("/usr/local/go")
# The VM's hard limits (podman's defaults ask more and fail); crun fails on hybrid cgroups.
PODMAN_BUILD_FLAGS = (
    "--runtime",
    "runc",
    "--network",
    "host",
    "--ulimit",
    "nofile=4096:4096",
    "--ulimit",
    "nproc=4096:4096",
    "--pull=never",
    "--layers",
)
BUILD_LABEL = f"{PROJECT}.io/image"
"""Set, to the component, on every image a build of ours commits, the intermediate stages'
too: what tells the untagged stages builds leave (`prune_left_stages`) from other projects'."""

Log = Callable[[str], None]


def image_name(component: str, tag: str, *, registry: str = REGISTRY) -> str:
    """The full name of a project image, as containerd's CRI resolves the chart's
    `lambda-kappa/<component>:<tag>`."""
    if not tag or tag == "latest":
        raise ImagesError(f"image tag {tag!r} refused: use a unique tag (make's IMAGE_TAG)")
    return f"{registry}/{PROJECT}/{component}:{tag}"


def image_tag(repo: Path = ROOT) -> str:
    """infra/kind.mk's IMAGE_TAG: `git describe --tags --always`, plus `-dirty-<hash>` of the
    uncommitted changes (tracked diff and untracked files' names)."""

    def git(*args: str) -> str:
        result = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, check=False
        )
        return result.stdout if result.returncode == 0 else ""

    tag = git("describe", "--tags", "--always").strip() or "dev"
    if git("status", "--porcelain"):
        changes = git("diff", "HEAD") + git("ls-files", "--others", "--exclude-standard")
        tag += "-dirty-" + hashlib.sha256(changes.encode()).hexdigest()[:8]
    return tag


def default_socket(settings: Settings) -> Path:
    """Where images go unless told otherwise: the containerd of `lk cluster up`."""
    return paths.containerd_socket(settings)


@dataclass(frozen=True)
class BuildPlan:
    """One `podman build`: the Dockerfile, its build arguments, and the cache volumes
    (host folder, container path)."""

    component: str
    dockerfile: Path
    build_args: dict[str, str] = field(default_factory=dict)
    volumes: tuple[tuple[Path, str], ...] = ()


def build_plans(
    settings: Settings, tag: str, *, base_ref: str, go_ref: str
) -> dict[str, BuildPlan]:
    cache = settings.cache_path
    go_mod, go_build = cache / "go" / "mod", cache / "go" / "build"
    m2 = cache / "m2"
    return {
        "app": BuildPlan(
            "app",
            DOCKER_DIR / "app.Dockerfile",
            {"PYTHON_IMAGE": base_ref},
            ((cache / "images" / "uv", "/root/.cache/uv"), (m2, "/root/.cache/lk/m2")),
        ),
        "airflow": BuildPlan(
            "airflow",
            DOCKER_DIR / "airflow.Dockerfile",
            {"APP_IMAGE": image_name("app", tag)},
        ),
        "kafka": BuildPlan(
            "kafka",
            DOCKER_DIR / "kafka.Dockerfile",
            {"BASE_IMAGE": base_ref},
            ((m2, "/root/.m2/repository"),),
        ),
        "minio": BuildPlan(
            "minio",
            DOCKER_DIR / "minio.Dockerfile",
            {
                "GO_IMAGE": go_ref,
                "BASE_IMAGE": base_ref,
                "MINIO_VERSION": settings.minio_version,
                # The host's paths inside too: Go's build cache keys hold the source paths.
                "GOMODCACHE": str(go_mod),
                "GOCACHE": str(go_build),
            },
            ((go_mod, str(go_mod)), (go_build, str(go_build))),
        ),
        "postgres": BuildPlan(
            "postgres",
            DOCKER_DIR / "postgres.Dockerfile",
            {"BASE_IMAGE": base_ref},
        ),
        # Prometheus's statsd_exporter for Airflow's metrics: built like MinIO, same Go caches.
        "statsd": BuildPlan(
            "statsd",
            DOCKER_DIR / "statsd.Dockerfile",
            {
                "GO_IMAGE": go_ref,
                "BASE_IMAGE": base_ref,
                "GOMODCACHE": str(go_mod),
                "GOCACHE": str(go_build),
            },
            ((go_mod, str(go_mod)), (go_build, str(go_build))),
        ),
        # Not the chart's: the Prometheus that the real-cluster tests (and `make
        # cluster-prometheus`) run to scrape the release (infra/prometheus.py).
        "prometheus": BuildPlan(
            "prometheus",
            DOCKER_DIR / "prometheus.Dockerfile",
            {"BASE_IMAGE": base_ref},
        ),
    }


def podman_build_command(plan: BuildPlan, tag: str, *, context: Path = ROOT) -> list[str]:
    cmd = ["podman", "build", *PODMAN_BUILD_FLAGS, "--label", f"{BUILD_LABEL}={plan.component}"]
    cmd += ["-f", str(plan.dockerfile)]
    for key, value in plan.build_args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    for host, inside in plan.volumes:
        cmd += ["-v", f"{host}:{inside}"]
    return [*cmd, "-t", image_name(plan.component, tag), str(context)]


def _image_size(ref: str) -> int:
    result = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Size}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    return int(result.stdout.strip() or 0)


def _podman_build(cmd: list[str], what: str, log_file: Path, log: Log) -> None:
    """Run a build, its output to `log_file`; print its STEP lines as progress."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            out.write(line)
            tail = [*tail[-40:], line]
            if line.startswith("STEP ") or (line.startswith("[") and "] STEP " in line):
                log(f"    {line.strip()[:110]}")
        code = proc.wait()
    if code != 0:
        raise ImagesError(f"{what} failed: {last_line(''.join(tail))} (log: {log_file})")


def go_toolchain_image(base_ref: str, *, goroot: Path = HOST_GOROOT, log: Log = print) -> str:
    """The base plus the host's Go toolchain at /usr/local/go: MinIO's and statsd's build stage."""
    go = goroot / "bin" / "go"
    if not go.is_file():
        raise ImagesError(f"no Go toolchain at {goroot} (the MinIO image's go install needs it)")
    version = subprocess.run(
        [str(go), "env", "GOVERSION"], capture_output=True, text=True, check=False
    ).stdout.strip()
    ref = f"{GO_REPOSITORY}:{version or 'go'}-{base_ref.rsplit('-', 1)[-1]}"
    if image_exists(ref):
        log(f"  go: {ref} (cached)")
        return ref
    started = time.monotonic()
    containerfile = f"FROM {base_ref}\nCOPY . /usr/local/go\nENV PATH=/usr/local/go/bin:$PATH\n"
    cmd = ["podman", "build", *PODMAN_BUILD_FLAGS, "-f", "-", "-t", ref, str(goroot)]
    result = subprocess.run(cmd, input=containerfile, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ImagesError(f"building {ref} failed: {last_line(result.stdout + result.stderr)}")
    log(f"  go: {ref} in {time.monotonic() - started:.0f} s")
    return ref


@dataclass(frozen=True)
class Built:
    ref: str
    seconds: float
    size_bytes: int


def build_all(
    settings: Settings,
    tag: str,
    *,
    base: str = "debootstrap",
    components: Sequence[str] = COMPONENTS,
    log: Log = print,
) -> list[Built]:
    """Build the base (cached), then each image with podman; return them in build order.

    `base`: "debootstrap" (infra/images/base.py) or the name of an image already in podman's
    storage with Debian bookworm and Python 3.11 (e.g. one pulled by hand).
    """
    unknown = set(components) - set(COMPONENTS)
    if unknown:
        raise ImagesError(f"unknown image(s) {sorted(unknown)}: choose among {COMPONENTS}")
    if shutil.which("podman") is None:
        raise ImagesError("'podman' is not installed (apt-get install podman buildah runc)")
    image_name("app", tag)  # refuses `latest` before any work
    started = time.monotonic()
    log(f"images: tag {tag}, cache {settings.cache_path}")
    if base == "debootstrap":
        base_ref = build_base(settings.cache_path, log=log)
    elif image_exists(base):
        base_ref = base
    else:
        raise ImagesError(f"base image {base} is not in podman's storage")
    needs_go = {"minio", "statsd"} & set(components)
    go_ref = go_toolchain_image(base_ref, log=log) if needs_go else ""
    plans = build_plans(settings, tag, base_ref=base_ref, go_ref=go_ref)
    if (
        "airflow" in components
        and "app" not in components
        and not image_exists(image_name("app", tag))
    ):
        raise ImagesError(f"the airflow image builds on {image_name('app', tag)}: build app too")
    built: list[Built] = []
    for component in COMPONENTS:
        if component not in components:
            continue
        plan = plans[component]
        for host, _ in plan.volumes:
            host.mkdir(parents=True, exist_ok=True)
        ref = image_name(component, tag)
        log(f"  {component}: building {ref}")
        t0 = time.monotonic()
        _podman_build(
            podman_build_command(plan, tag),
            f"podman build of {ref}",
            settings.cache_path / "images" / "logs" / f"{component}.log",
            log,
        )
        item = Built(ref, time.monotonic() - t0, _image_size(ref))
        built.append(item)
        log(f"  {component}: {ref} in {item.seconds:.0f} s, {item.size_bytes / 1e6:.0f} MB")
        prune_left_stages(component, log=log)
    log(f"images: {len(built)} built in {time.monotonic() - started:.0f} s")
    prune_other_tags(tag, log=log)
    return built


def prune_other_tags(tag: str, *, log: Log = print) -> list[str]:
    """Remove the project's images of every other tag from podman's storage.

    Each commit's tag holds about 6 GB (app and airflow share most of it): a day of rebuilds
    filled this machine's disk, and the cluster then refused every pod (DiskPressure). The base
    and the Go toolchain images stay (they are the build cache)."""
    listed = subprocess.run(
        ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    ours = tuple(f"{REGISTRY}/{PROJECT}/{component}:" for component in COMPONENTS)
    stale = [ref for ref in listed if ref.startswith(ours) and not ref.endswith(f":{tag}")]
    if stale:
        # Their parent layers go with them when no image of this tag shares them.
        subprocess.run(["podman", "rmi", "--force", *stale], capture_output=True, check=False)
        log(f"images: removed {len(stale)} image(s) of older tags")
    return stale


def left_stages(component: str) -> list[str]:
    """The untagged images our builds of `component` left, newest first: a multi-stage build
    commits its last stage but one (the app's `build`: Maven, the project, the jars) as an
    image that nothing tags or uses."""
    listed = subprocess.run(
        ["podman", "images", "--no-trunc", "--filter", "dangling=true",
         "--filter", f"label={BUILD_LABEL}={component}", "--format", "json"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    images = json.loads(listed or "[]")
    return [i["Id"] for i in sorted(images, key=lambda i: i["Created"], reverse=True)]


def prune_left_stages(component: str, *, log: Log = print) -> list[str]:
    """Remove the stages earlier builds of `component` left (one per build: 0.7 GB of the app),
    with the untagged parents only they used. The newest stays: this build's own, whose
    parents (the app's `deps` stage) are the layer cache the next build reuses while uv.lock
    stays the same; removing it would remove them."""
    stale = left_stages(component)[1:]
    if stale:
        subprocess.run(["podman", "rmi", "--ignore", *stale], capture_output=True, check=False)
        log(f"images: removed {len(stale)} stage(s) that earlier {component} builds left")
    return stale


def load_into_containerd(
    socket: Path | str,
    images: Sequence[str],
    *,
    namespace: str = "k8s.io",
    skip_present: bool = True,
    log: Log = print,
) -> None:
    """Import podman images into a containerd (the CRI's namespace by default), by name.

    One multi-image archive (`podman save -m --format docker-archive`, uncompressed): layers
    the images share (app and airflow: all but one) are written and imported once. The
    archive's RepoTags are the full names, which containerd keeps. `skip_present`: a name
    containerd already has is not imported again (tags are unique per content: make's
    IMAGE_TAG changes with every commit and uncommitted change).
    """
    if not images:
        return
    if shutil.which("ctr") is None:
        raise ImagesError("'ctr' is not installed (apt-get install containerd)")
    if not Path(socket).exists():
        raise ImagesError(f"no containerd socket at {socket}: is the cluster up (lk cluster up)?")
    ctr = ["ctr", "--address", str(socket), "-n", namespace]
    requested = list(images)
    tags = {ref.rpartition(":")[2] for ref in requested}
    to_import = requested
    if skip_present:
        present = set(_names_in_containerd(ctr))
        for ref in images:
            if ref in present:
                log(f"  {ref}: already in containerd")
        to_import = [ref for ref in requested if ref not in present]
    if to_import:
        _import(ctr, to_import, log)
    if len(tags) == 1 and all(ref.startswith(f"{REGISTRY}/{PROJECT}/") for ref in requested):
        # One build of the project's images: its other tags can go.
        prune_other_tags_in_containerd(ctr, tags.pop(), log=log)


def _names_in_containerd(ctr: list[str]) -> list[str]:
    listing = [*ctr, "images", "ls", "-q"]
    result = subprocess.run(listing, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ImagesError(f"ctr images ls failed: {last_line(result.stderr)}")
    return result.stdout.split()


def _import(ctr: list[str], images: list[str], log: Log) -> None:
    missing = [ref for ref in images if not image_exists(ref)]
    if missing:
        raise ImagesError(f"not in podman's storage: {', '.join(missing)} (build them first)")
    t0 = time.monotonic()
    save = subprocess.Popen(
        ["podman", "save", "-m", "--format", "docker-archive", *images],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert save.stdout is not None
    result = subprocess.run(
        [*ctr, "images", "import", "-"],
        stdin=save.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    save.stdout.close()
    save_err = (save.communicate()[1] or b"").decode(errors="replace")
    if save.returncode != 0:
        raise ImagesError(f"podman save failed: {last_line(save_err)}")
    if result.returncode != 0:
        raise ImagesError(f"ctr images import failed: {last_line(result.stderr)}")
    listed = _names_in_containerd(ctr)
    absent = [ref for ref in images if ref not in listed]
    if absent:
        raise ImagesError(f"after ctr import, containerd has no image named {', '.join(absent)}")
    log(f"  loaded {len(images)} image(s) in {time.monotonic() - t0:.0f} s")
    for ref in images:
        log(f"    {ref}")


def prune_other_tags_in_containerd(ctr: list[str], tag: str, *, log: Log = print) -> list[str]:
    """`prune_other_tags` in the cluster's containerd: the project's images of other tags, and
    the `sha256:<id>` references the CRI keeps for them, whose layers go with the last one (a
    week of rebuilds had left 3 tags there, 8 GB more). A running pod keeps its snapshot."""
    listed = subprocess.run(
        [*ctr, "images", "ls"], capture_output=True, text=True, check=False
    ).stdout.splitlines()[1:]
    rows = [(cols[0], cols[2]) for line in listed if len(cols := line.split()) >= 3]
    ours = tuple(f"{REGISTRY}/{PROJECT}/{component}:" for component in COMPONENTS)
    stale = [ref for ref, _ in rows if ref.startswith(ours) and not ref.endswith(f":{tag}")]
    kept = {digest for ref, digest in rows if not ref.startswith("sha256:") and ref not in stale}
    gone = {digest for ref, digest in rows if ref in stale} - kept
    ids = [ref for ref, digest in rows if ref.startswith("sha256:") and digest in gone]
    if stale:
        subprocess.run([*ctr, "images", "rm", *stale, *ids], capture_output=True, check=False)
        log(f"  removed {len(stale)} image(s) of older tags from containerd")
    return [*stale, *ids]
