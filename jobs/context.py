"""One context per command (pyiceberg's CLI: ``ctx.obj``), built once from the shared options
(:mod:`jobs.options`): the log dirs and topics, where the settings come from, the time and rules of the
run, where the result goes, and the Spark master. A job is then its own decisions, not a copy of the
prologue: start Spark in the background, list (mistakes said without waiting for Spark), load the
settings, make the options, take Spark.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click

from jobs.output import Output, tell
from jobs.spark import SparkCore, spark_session, start_spark
from kafka_log_core.errors import KafkaLogError, ReadOnlyLogDirError, UsageError
from kafka_log_core.format import compression
from kafka_log_core.log import locks
from kafka_log_core.log.listing import Listing, list_log_dirs
from kafka_log_core.settings.config import ConfigSet
from kafka_log_core.settings.log_dir_config import describe, resolve_log_dir_configs
from kafka_log_core.work.tasks import JobOptions

DEFAULT_CONF_DIR = Path("conf")


def topic_pattern(topic_regex: str | None) -> re.Pattern | None:
    """``--topic`` compiled, or a usage error naming what is wrong with the regex."""
    if topic_regex is None:
        return None
    try:
        return re.compile(topic_regex)
    except re.error as err:
        raise click.BadParameter(
            f"{topic_regex!r} is not a regular expression: {err}", param_hint="'--topic'"
        ) from None


def list_tasks(log_dirs, topic_regex: str | None, *, writing: bool) -> Listing:
    """The driver's listing (:func:`kafka_log_core.log.listing.list_log_dirs`): a usage error (exit 2) when
    nothing is selected, saying why; exit 1 when a job that writes can write no log dir."""
    try:
        return list_log_dirs(list(log_dirs), topic_pattern(topic_regex), writing=writing)
    except UsageError as err:
        raise click.UsageError(str(err)) from None
    except ReadOnlyLogDirError as err:
        raise click.ClickException(str(err)) from None


@dataclass(frozen=True)
class ConfigSources:
    """Where a run's settings come from besides each log dir's own metadata (the shared options)."""

    conf_dir: str | None = None
    config_files: tuple[str, ...] = ()
    topic_configs: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    kafka_version: str | None = None
    assume_broker_defaults: bool = False
    metadata_log_dirs: tuple[str, ...] = ()


def load_configs(log_dirs, sources: ConfigSources = ConfigSources()) -> dict[str, ConfigSet]:
    """Each log dir's configuration (its cluster metadata, Kafka release, and the user's files and flags);
    says on stderr where the settings come from. Keyed like the tasks: by absolute path."""
    s = sources
    conf = Path(s.conf_dir) if s.conf_dir else (DEFAULT_CONF_DIR if DEFAULT_CONF_DIR.is_dir() else None)
    try:
        resolved = resolve_log_dir_configs(
            list(log_dirs), conf_dir=conf, config_files=list(s.config_files), topic_configs=list(s.topic_configs),
            sets=list(s.sets), kafka_version=s.kafka_version, assume_broker_defaults=s.assume_broker_defaults,
            metadata_log_dirs=list(s.metadata_log_dirs),
        )  # fmt: skip
    except KafkaLogError as err:
        raise click.UsageError(str(err)) from err
    for log_dir, config in resolved.items():
        for line in describe(log_dir, config):
            tell(line)
    # Absolute: executors resolve relative paths against their own working directory.
    return {os.path.abspath(log_dir): config.configs for log_dir, config in resolved.items()}


def job_options(now_ms: int | None, **kw) -> JobOptions:
    """The options a task gets; ``now_ms`` None: the clock."""
    if kw.get("recover_truncating") and not kw.get("recover", True):
        raise click.UsageError("--recover-truncating and --no-recover exclude each other")
    return JobOptions(now_ms=int(time.time() * 1000) if now_ms is None else now_ms, **kw)


@dataclass(frozen=True)
class JobContext:
    """What the shared options say, built once per command and kept as its ``ctx.obj``."""

    log_dirs: tuple[str, ...]
    topic_regex: str | None = None
    sources: ConfigSources = field(default_factory=ConfigSources)
    now_ms: int | None = None
    require_high_watermark: bool = False
    recover: bool = True
    recover_truncating: bool = False
    output: Output = field(default_factory=Output)
    master: str | None = None
    verbose: bool = False
    max_batch_bytes: int = compression.MAX_BATCH_BYTES  # --max-decompressed-batch-bytes (the READ group)
    busy_timeout_s: float = locks.BUSY_TIMEOUT_S  # --busy-timeout (the WRITE group)

    def listing(self, *, writing: bool) -> Listing:
        """The partitions to work on; a mistake is said here, before Spark starts."""
        return list_tasks(self.log_dirs, self.topic_regex, writing=writing)

    def configs(self) -> dict[str, ConfigSet]:
        return load_configs(self.log_dirs, self.sources)

    def options(self, **kw) -> JobOptions:
        """The tasks' options: this run's time, rules, decompression limit and wait for a busy partition, and
        the job's own (``kw``)."""
        return job_options(
            self.now_ms, require_high_watermark=self.require_high_watermark, recover=self.recover,
            recover_truncating=self.recover_truncating, max_batch_bytes=self.max_batch_bytes,
            busy_timeout_s=self.busy_timeout_s, **kw,
        )  # fmt: skip

    def spark(self, app: str, conf: dict[str, str] | None = None):
        return spark_session(self.master, f"kafka-log-jobs {app}", conf, verbose=self.verbose)

    def start_spark(self, app: str) -> Callable[[], SparkCore]:
        """Spark's core (no SQL session) started now, in the background; call the result to wait for it."""
        return start_spark(self.master, f"kafka-log-jobs {app}", verbose=self.verbose)
