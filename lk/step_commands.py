"""`lk step NAME [KEY=VALUE ...]`: one step of a DAG, as a command (the pods of the Kubernetes
backend run this; it also helps to rerun a single step by hand).

    lk step compute-views logic_version=2
    lk step validate-views version=7 run_name=manual
    lk step kappa-replay-round version=3 --xcom-file /airflow/xcom/return.json

The result is printed as one JSON line; `--xcom-file` also writes it where the
KubernetesPodOperator's sidecar reads the task's XCom. A step with nothing to do (a batch with
nothing new to compute) is not a failure: it prints one line, `lk step NAME: skipped, <reason>`,
writes no result and exits with `SKIP_EXIT_CODE` (99), which the pod's operator turns into a
skipped task.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from core.settings import Settings
from lk.errors import fail, guarded
from lk.spark_output import spark_session
from lk.step_registry import SKIP_EXIT_CODE, STEPS, NothingToDo, StepError, get_step, run_step

_LIST = "\n".join(f"  {name}: {step.summary}" for name, step in STEPS.items())


# "\b": click keeps the list as written instead of rewrapping it into one paragraph.
@click.command(epilog=f"\b\nSteps:\n{_LIST}", context_settings={"max_content_width": 100})
@click.argument("name", type=click.Choice(list(STEPS)), metavar="NAME")
@click.argument("arguments", nargs=-1, metavar="[KEY=VALUE]...")
@click.option(
    "--xcom-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the JSON result here (KubernetesPodOperator: /airflow/xcom/return.json).",
)
@click.pass_obj
@guarded
def step(settings: Settings, name: str, arguments: tuple[str, ...], xcom_file: Path | None) -> None:
    """Run one step of a DAG (values are JSON where they parse, else text)."""
    import psycopg

    from quality.result import QualityGateError  # deferred: pandas

    args = {}
    for item in arguments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"expected KEY=VALUE, got {item!r}")
        args[key] = value
    started = None

    def spark():  # type: ignore[no-untyped-def]
        nonlocal started
        if started is None:
            started = spark_session(settings, f"lk-step-{name}")
        return started

    skipped = None
    try:
        get_step(name)
        result = run_step(name, args, settings, spark)
    except NothingToDo as exc:
        skipped = str(exc)
    # Gates, the layers' own errors (BatchError, ReprocessError: RuntimeError) and the store.
    except (StepError, QualityGateError, RuntimeError, ValueError, psycopg.Error) as exc:
        fail(" ".join(str(exc).split()))
    finally:
        if started is not None:
            started.stop()
    if skipped is not None:
        click.echo(f"lk step {name}: skipped, {skipped}", err=True)
        raise click.exceptions.Exit(SKIP_EXIT_CODE)
    text = json.dumps(result)
    if xcom_file is not None:
        xcom_file.parent.mkdir(parents=True, exist_ok=True)
        xcom_file.write_text(text)
    click.echo(text)
