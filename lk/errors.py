"""How `lk` fails: a one-line reason on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import click
import confluent_kafka
import psycopg

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


_SPARK_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+)\] ")


def spark_reason(exc: BaseException) -> str:
    """One line for a failed Spark job: its error classes, outermost first (a stream's failure
    wraps the batch function's, which wraps the cause), and the innermost one's sentence."""
    text = str(exc)
    found = list(_SPARK_ERROR_CLASS.finditer(text))
    if not found:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return f"Spark failed: {first[:300]}"
    classes = " > ".join(dict.fromkeys(match[1] for match in found))
    sentence = text[found[-1].end() :].splitlines()[0]
    return f"Spark failed ({classes}): {sentence[:300]}"


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
        except psycopg.OperationalError as exc:  # the store down, refusing, or timing out
            fail(f"the serving store did not answer: {' '.join(str(exc).split())}")
        except confluent_kafka.KafkaException as exc:  # the log unreachable, or not answering
            fail(f"Kafka: {exc.args[0].str() if exc.args else exc}")
        except RuntimeError as exc:
            # Imported only here: the module loads Spark, which most commands never need.
            from core.master_dataset import MasterDatasetError  # deferred: pyspark

            if isinstance(exc, MasterDatasetError):
                fail(" ".join(str(exc).split()))
            raise
        except Exception as exc:
            # A Spark job's failure (pyspark's own exception types, not RuntimeError): one line,
            # not a Python traceback around a query plan. Spark's log above keeps the detail.
            if type(exc).__module__.startswith("pyspark."):
                fail(spark_reason(exc))
            raise

    return wrapper
