"""`python -m infra.images build|load`: the podman path of the images (make cluster-images,
make cluster-load). A failure prints one line and exits 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.settings import get_settings
from infra.images import (
    COMPONENTS,
    ImagesError,
    build_all,
    default_socket,
    image_name,
    image_tag,
    load_into_containerd,
)


def _progress(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.images", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the base and the images with podman")
    load = sub.add_parser("load", help="import the images into a containerd")
    for p in (build, load):
        p.add_argument("--tag", help="image tag (default: infra/kind.mk's IMAGE_TAG)")
        p.add_argument(
            "--only", help=f"comma-separated subset of {','.join(COMPONENTS)}", default=""
        )
    build.add_argument("--base", default="debootstrap", help="debootstrap, or an image in podman")
    build.add_argument("--load", action="store_true", help="then import them (like `load`)")
    for p in (build, load):
        p.add_argument("--socket", type=Path, help="containerd socket (default: the cluster's)")
    args = parser.parse_args(argv)

    settings = get_settings()
    tag = args.tag or image_tag()
    components = [c for c in args.only.split(",") if c] or list(COMPONENTS)
    try:
        if args.command == "build":
            build_all(settings, tag, base=args.base, components=components, log=_progress)
        if args.command == "load" or args.load:
            socket = args.socket or default_socket(settings)
            print(f"loading into containerd at {socket}", flush=True)
            load_into_containerd(socket, [image_name(c, tag) for c in components], log=_progress)
    except ImagesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
