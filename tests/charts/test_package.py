"""Issue 44, part 3: a chart users can package: its metadata, license, README and package."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import yaml

from infra import chart
from tests.charts.chart_utils import CHART_DIR, ROOT


def _values_comments() -> dict[str, str]:
    """Each documented value of values.yaml (a `# --` comment above it) -> its description, as
    helm-docs reads them: the comment's lines joined, the key's path dotted."""
    documented: dict[str, str] = {}
    path: list[tuple[int, str]] = []
    comment: list[str] | None = None
    for line in (CHART_DIR / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("# -- "):
            comment = [stripped[5:]]
        elif stripped.startswith("#"):
            if comment is not None:
                comment.append(stripped[1:].strip())
        elif (key := re.match(r"^\s*([A-Za-z][\w]*):", line)) and not stripped.startswith("-"):
            path = [(i, k) for i, k in path if i < indent] + [(indent, key[1])]
            if comment is not None:
                documented[".".join(k for _, k in path)] = " ".join(comment)
            comment = None
        elif not stripped:
            comment = None
    return documented


def _readme_rows() -> dict[str, str]:
    """The rows of the README's table of every value (its last section; other tables are
    prose)."""
    table = chart.README.read_text().split("\n## Every value", 1)[1]
    rows = re.findall(r"^\| (\S+) \| \S+ \| .* \| (.*) \|$", table, re.M)
    return {key: text for key, text in rows if key != "Key"}  # the header row


def test_the_license_should_be_apache_2_in_the_repository_and_the_chart() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert (CHART_DIR / "LICENSE").read_text() == text  # the packaged copy, kept equal
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def test_chart_yaml_should_name_home_sources_and_maintainers() -> None:
    meta = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert meta["home"].startswith("https://")
    assert meta["sources"] and all(s.startswith("https://") for s in meta["sources"])
    assert meta["maintainers"] and all("email" not in m for m in meta["maintainers"])
    assert meta["annotations"]["artifacthub.io/license"] == "Apache-2.0"


def test_the_readme_should_document_every_value_as_values_yaml_does() -> None:
    """The table helm-docs makes: one row per documented value, with values.yaml's own words
    (so a value added without `make chart-docs` fails here), and no row for a gone value."""
    documented = _values_comments()
    rows = _readme_rows()
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    for key in values:
        assert any(k == key or k.startswith(f"{key}.") for k in rows), f"{key}: no row"
    assert set(rows) == set(documented)
    for key, description in documented.items():
        assert rows[key].split() == description.split(), key  # helm-docs keeps inner spaces


def test_the_readme_should_be_what_helm_docs_makes() -> None:
    """Exactly `make chart-docs`'s output (helm-docs is built from the Go proxy into the cache
    on the first run, as the stack's MinIO is)."""
    from core.settings import get_settings

    assert chart.render_readme(get_settings()) == chart.README.read_text()


def test_the_package_should_lint_and_carry_its_readme_and_license(tmp_path: Path) -> None:
    archive = chart.package(tmp_path)  # helm package, helm lint --strict, helm show readme
    assert archive.name == "lambda-kappa-0.1.0.tgz"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        readme = tar.extractfile("lambda-kappa/README.md")
        assert readme is not None and readme.read().decode() == chart.README.read_text()
    assert {"lambda-kappa/LICENSE", "lambda-kappa/values.schema.json"} <= names
    assert "lambda-kappa/README.md.gotmpl" not in names  # the README's source stays home
