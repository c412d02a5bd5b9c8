"""How `lk` fails: a one-line reason on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import click

from core.kafka_io import ProduceError
from core.provision import ProvisionError
from core.spark import SparkJarsMissingError
from infra.stack.process import StackError

P = ParamSpec("P")
R = TypeVar("R")


class CommandError(click.ClickException):
    def show(self, file=None) -> None:  # type: ignore[no-untyped-def, override]
        click.echo(f"lk: error: {self.format_message()}", err=True)


def fail(reason: str) -> NoReturn:
    raise CommandError(reason)


def guarded(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the project's expected failures into one line and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except (
            StackError,
            ProduceError,
            ProvisionError,
            SparkJarsMissingError,
            OSError,
            TimeoutError,
        ) as exc:
            fail(" ".join(str(exc).split()) or type(exc).__name__)
        except KeyboardInterrupt:
            fail("interrupted")
        except RuntimeError as exc:
            # Imported only here: the module loads Spark, which most commands never need.
            from core.master_dataset import MasterDatasetError  # deferred: pyspark

            if isinstance(exc, MasterDatasetError):
                fail(" ".join(str(exc).split()))
            raise

    return wrapper
