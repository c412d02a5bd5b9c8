"""A Debian bookworm base image without any container registry: debootstrap from the host's
apt mirror, made usable as the Dockerfiles' PYTHON_IMAGE / BASE_IMAGE, imported into podman.

What the rootfs gets on top of `debootstrap --variant=minbase`: python3 (3.11, bookworm's),
python3-venv, python3-pip, ca-certificates and passwd (useradd, as in debian:bookworm-slim);
`python`/`pip` on PATH and pip allowed to install (no EXTERNALLY-MANAGED), as in the official
python image; apt sources for bookworm, -updates and -security on the same mirror; apt's
"docker-clean" settings and dpkg's path excludes of the slim images; the host's extra CA
certificates (/usr/local/share/ca-certificates), so builds behind a TLS-inspecting proxy work.

The rootfs tarball is cached under `<cache>/images/` with a marker holding the fingerprint of
every input (the project's marker idiom, infra/stack/artifacts.py): a second run does nothing.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from infra.images.errors import ImagesError, last_line

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates", "passwd")
BASE_REPOSITORY = "localhost/lambda-kappa/base"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
# Image config set by `podman import` (an imported tarball has none).
IMAGE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["bash"]',
)

# Files written into the rootfs; part of the fingerprint.
_CLEAN_DEBS = (
    "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb"
    " /var/cache/apt/*.bin || true"
)
_APT_CLEAN = f"""\
// As the official Debian images: no .deb and no package cache left in a layer.
DPkg::Post-Invoke {{ "{_CLEAN_DEBS}"; }};
APT::Update::Post-Invoke {{ "{_CLEAN_DEBS}"; }};
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
"""
_APT_NO_RECOMMENDS = 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
_DPKG_EXCLUDES = """\
# As debian:bookworm-slim: no documentation, manual pages or translations in the image.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
"""
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")

Log = Callable[[str], None]


def _sources_entries(sources_dir: Path) -> list[tuple[str, list[str]]]:
    """(URI, suites) of every `deb` entry in sources.list and sources.list.d (both formats)."""
    entries: list[tuple[str, list[str]]] = []
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(
                    (m[1].lower(), m[2].strip())
                    for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.MULTILINE)
                )
                if "deb" not in fields.get("types", "").split():
                    continue
                for uri in fields.get("uris", "").split():
                    entries.append((uri.rstrip("/"), fields.get("suites", "").split()))
        elif path.suffix == ".list":
            for line in text.splitlines():
                m = re.match(r"^\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
                if m:
                    entries.append((m[1].rstrip("/"), [m[2]]))
    return entries


def host_mirrors(sources_dir: Path = Path("/etc/apt")) -> tuple[str, str]:
    """The host's Debian mirror for `bookworm` and its security mirror (defaults when absent)."""
    mirror = security = None
    for uri, suites in _sources_entries(sources_dir):
        if mirror is None and SUITE in suites:
            mirror = uri
        if security is None and f"{SUITE}-security" in suites:
            security = uri
    return mirror or DEFAULT_MIRROR, security or DEFAULT_SECURITY_MIRROR


def _extra_cas(ca_dir: Path) -> list[Path]:
    return sorted(p for p in ca_dir.glob("*.crt") if p.is_file()) if ca_dir.is_dir() else []


def fingerprint(mirror: str, security: str, ca_files: list[Path]) -> str:
    parts = [
        SUITE,
        mirror,
        security,
        " ".join(PACKAGES),
        "\n".join(IMAGE_CHANGES),
        _APT_CLEAN,
        _APT_NO_RECOMMENDS,
        _DPKG_EXCLUDES,
        *(f"{p.name}\n{p.read_text(errors='replace')}" for p in ca_files),
        "recipe 1",  # bump when _customize changes
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def base_ref(fp: str) -> str:
    return f"{BASE_REPOSITORY}:{SUITE}-{fp}"


def debian_sources(mirror: str, security: str) -> str:
    return (
        f"Types: deb\nURIs: {mirror}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {security}\nSuites: {SUITE}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )


def _run(cmd: list[str], what: str, *, log_file: Path | None = None) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if log_file is not None:
        log_file.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        where = f" (log: {log_file})" if log_file else ""
        raise ImagesError(f"{what} failed: {last_line(result.stdout + result.stderr)}{where}")


def _customize(root: Path, mirror: str, security: str, ca_files: list[Path]) -> None:
    """Make the debootstrapped tree a usable base image (see the module's docstring)."""
    (root / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
    local_bin = root / "usr/local/bin"
    local_bin.mkdir(parents=True, exist_ok=True)
    for name, target in (("python", "/usr/bin/python3"), ("pip", "/usr/bin/pip3")):
        (local_bin / name).unlink(missing_ok=True)
        (local_bin / name).symlink_to(target)
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(debian_sources(mirror, security))
    (root / "etc/apt/apt.conf.d/docker-clean").write_text(_APT_CLEAN)
    (root / "etc/apt/apt.conf.d/docker-no-recommends").write_text(_APT_NO_RECOMMENDS)
    (root / "etc/dpkg/dpkg.cfg.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/dpkg/dpkg.cfg.d/docker").write_text(_DPKG_EXCLUDES)
    if ca_files:
        ca_dest = root / "usr/local/share/ca-certificates"
        ca_dest.mkdir(parents=True, exist_ok=True)
        for ca in ca_files:
            shutil.copyfile(ca, ca_dest / ca.name)
        _run(["chroot", str(root), "update-ca-certificates"], "update-ca-certificates")
    # What the runtime provides, or the host left behind.
    for name in ("etc/resolv.conf", "etc/hostname"):
        (root / name).unlink(missing_ok=True)
    (root / "etc/hostname").write_text("")
    for folder in ("var/lib/apt/lists", "var/cache/apt", "var/log", "dev", "tmp", "run"):
        path = root / folder
        if path.is_dir():
            for child in path.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    (root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    for folder in _TRIM:
        path = root / folder
        if not path.is_dir():
            continue
        for child in path.iterdir():
            if folder == "usr/share/doc" and child.is_dir() and not child.is_symlink():
                for item in child.iterdir():  # keep each package's copyright
                    if item.name != "copyright":
                        shutil.rmtree(item) if item.is_dir() else item.unlink()
            elif child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    # update-alternatives of some packages (Java) writes links there.
    (root / "usr/share/man/man1").mkdir(parents=True, exist_ok=True)


def image_exists(ref: str) -> bool:
    result = subprocess.run(["podman", "image", "exists", ref], capture_output=True, check=False)
    return result.returncode == 0


def build_base(
    cache_dir: Path,
    *,
    sources_dir: Path = Path("/etc/apt"),
    ca_dir: Path = HOST_CA_DIR,
    log: Log = print,
) -> str:
    """The base image's reference in podman, built (debootstrap) and imported when missing."""
    for tool in ("debootstrap", "podman", "tar", "chroot"):
        if shutil.which(tool) is None:
            raise ImagesError(f"'{tool}' is not installed (apt-get install debootstrap podman)")
    mirror, security = host_mirrors(sources_dir)
    ca_files = _extra_cas(ca_dir)
    fp = fingerprint(mirror, security, ca_files)
    ref = base_ref(fp)
    images_dir = cache_dir / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    tarball = images_dir / f"base-{SUITE}.tar"
    marker = images_dir / f"base-{SUITE}.fingerprint"
    current = tarball.is_file() and marker.is_file() and marker.read_text().strip() == fp
    if current and image_exists(ref):
        log(f"  base: {ref} (cached)")
        return ref
    if not current:
        started = time.monotonic()
        root = images_dir / f"rootfs-{SUITE}.partial"
        shutil.rmtree(root, ignore_errors=True)
        log(f"  base: debootstrap --variant=minbase {SUITE} from {mirror} (about 90 s)")
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(root),
                mirror,
            ],
            "debootstrap",
            log_file=images_dir / "debootstrap.log",
        )
        _customize(root, mirror, security, ca_files)
        partial = tarball.with_name(tarball.name + ".partial")
        _run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial), "."],
            "tar of the rootfs",
        )
        partial.rename(tarball)
        marker.write_text(fp)
        shutil.rmtree(root, ignore_errors=True)
        size = tarball.stat().st_size / 1e6
        log(f"  base: rootfs {size:.0f} MB in {time.monotonic() - started:.0f} s -> {tarball}")
    cmd = ["podman", "import"]
    for change in IMAGE_CHANGES:
        cmd += ["--change", change]
    _run([*cmd, str(tarball), ref], "podman import of the base")
    log(f"  base: imported {ref}")
    return ref
