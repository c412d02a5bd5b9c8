"""The chart as users get it: its package, and its README's table of every value.

    python -m infra.chart package [--out out/chart]   # make chart-package
    python -m infra.chart docs [--check]              # make chart-docs

`package` is `helm package`, then `helm lint --strict` and `helm show readme` of the archive it
wrote (Helm is the Go Helm SDK of the `helm-python-sdk` wheel: no binary, no network).

`docs` writes charts/lambda-kappa/README.md from README.md.gotmpl and values.yaml's `# --`
comments with helm-docs (github.com/norwoodj/helm-docs), built with `go install` from the Go
module proxy into the cache's tools folder, as infra.cluster.build builds helm and CoreDNS.
`--check` writes nothing and exits 1 when the README is not what helm-docs makes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Final

from core.settings import Settings, get_settings
from infra.cluster.build import _go_install, go_env

ROOT: Final = Path(__file__).resolve().parents[1]
CHART_DIR: Final = ROOT / "charts" / "lambda-kappa"
README: Final = CHART_DIR / "README.md"
HELM_DOCS_MODULE: Final = "github.com/norwoodj/helm-docs/cmd/helm-docs"
HELM_DOCS_VERSION: Final = "v1.14.2"
# helm-docs' options: the chart's own template, values in file order (the order values.yaml
# explains them in), and no footer naming the tool's version (the README would change with it).
HELM_DOCS_ARGS: Final = (
    "--chart-search-root",
    "charts",
    "--template-files",
    "README.md.gotmpl",
    "--sort-values-order",
    "file",
    "--skip-version-footer",
    "--log-level",
    "warning",
)


def helm_docs_binary(settings: Settings) -> Path:
    """helm-docs, built once into the cache (rebuilt when its version changes)."""
    return _go_install(settings, HELM_DOCS_MODULE, HELM_DOCS_VERSION, "helm-docs")


def render_readme(settings: Settings) -> str:
    """The README helm-docs makes of the chart as it is now (nothing written)."""
    run = subprocess.run(
        [str(helm_docs_binary(settings)), *HELM_DOCS_ARGS, "--dry-run"],
        cwd=ROOT,
        env=go_env(settings, mod_mode=False),
        capture_output=True,
        text=True,
        check=True,
    )
    if not run.stdout.strip():  # helm-docs skips a chart it cannot read, and exits 0
        raise SystemExit(f"helm-docs made no README: {run.stderr.strip()}")
    return run.stdout


def docs(settings: Settings, *, check: bool) -> int:
    readme = render_readme(settings)
    if check:
        if README.read_text() != readme:
            print(f"{README.relative_to(ROOT)} is not current: run `make chart-docs`")
            return 1
        print(f"{README.relative_to(ROOT)} is current")
        return 0
    README.write_text(readme)
    print(f"wrote {README.relative_to(ROOT)}")
    return 0


def package(out_dir: Path) -> Path:
    """`helm package` into out_dir, then lint the archive and read its README back."""
    import helm_python as helm

    out_dir.mkdir(parents=True, exist_ok=True)
    archive = Path(helm.package(CHART_DIR, destination=out_dir))
    report = helm.lint(archive, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + list(report["errors"])
    if problems:
        raise SystemExit(f"helm lint --strict {archive}: {problems}")
    if not helm.show(str(archive), output_format="readme").strip():
        raise SystemExit(f"helm show readme {archive}: empty")
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.chart", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    pack = commands.add_parser("package", help="package the chart, lint the package")
    pack.add_argument("--out", type=Path, default=ROOT / "out" / "chart")
    documentation = commands.add_parser("docs", help="write the chart README (helm-docs)")
    documentation.add_argument("--check", action="store_true", help="only check it is current")
    args = parser.parse_args(argv)
    if args.command == "package":
        archive = package(args.out)
        print(f"{archive.relative_to(ROOT) if archive.is_relative_to(ROOT) else archive}: linted")
        return 0
    return docs(get_settings(), check=args.check)


if __name__ == "__main__":
    sys.exit(main())
