"""The Schema Registry's schemas, for the ``schemas`` option: its ``_schemas`` topic read from the log
dirs on the driver (the records a consumer fetches, ``read_uncommitted`` up to the high watermark, as
the registry's own reader thread reads them at start-up; every batch checked as any read), or a file.

    schemas=log          the topic named by ``schemasTopic`` (default ``_schemas``) in the loaded log dirs
    schemas=/path.json   the registry's REST answers saved in a file (kafka_log_core.registry.storage)
    schemas=http(s)://host:port[/path]
                         the same answers asked of a live registry (kafka_log_core.registry.rest)
"""

from __future__ import annotations

import json
import os

from kafka_log_core.errors import SchemaError, UsageError
from kafka_log_core.registry import rest
from kafka_log_core.registry.storage import SchemaStore, read_schema_file, replay
from spark_udfs import planning, rows
from spark_udfs.options import ReadOptions

FROM_LOG = "log"
NONE = "none"


def read_topic(paths: tuple[str, ...], topic: str) -> SchemaStore:
    """The store the registry would build from ``topic`` in the log dirs ``paths``."""
    options = ReadOptions.parse(
        {"paths": json.dumps(list(paths)), "subscribe": topic, "kafka.isolation.level": "read_uncommitted"}
    )
    splits = planning.plan(options)
    if not splits:
        raise SchemaError(f"schemas=log: the log dirs hold no partition of the registry's topic {topic!r}")
    if len({(s.source.topic, s.source.partition) for s in splits}) > 1:
        raise SchemaError(f"{topic}: the registry's topic has one partition; these log dirs hold more")
    found = []
    for split in sorted(splits, key=lambda s: s.start_offset):
        found.extend((row[4], row[0], row[1]) for row in rows.record_rows(split, options))
    return replay(found, f"{topic}-0")


def load(schemas: str, topic: str, paths: tuple[str, ...]) -> SchemaStore | None:
    """The store the ``schemas`` option names (None for ``none``)."""
    if schemas == NONE:
        return None
    if schemas == FROM_LOG:
        return read_topic(paths, topic)
    if rest.is_registry_url(schemas):
        return rest.read_registry(schemas)
    return read_schema_file(check(schemas))


def pinned(schemas: str, directory: str) -> str:
    """The ``schemas`` value a job passes to its reads: a registry URL's answers asked once and saved as a
    schema file in ``directory`` (the job's own), so that the columns and every read decode with one
    snapshot of a registry that may change meanwhile, and the credentials are used on the driver only;
    any other value as it is."""
    if not rest.is_registry_url(schemas):
        return schemas
    path = os.path.join(directory, "registry-schemas.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rest.read_answers(schemas), f)
    return path


def check(schemas: str) -> str:
    """``schemas`` if it is a value of the option; a :class:`UsageError` (exit 2) otherwise."""
    if rest.is_registry_url(schemas):
        rest.check_url(schemas)
    elif schemas not in (NONE, FROM_LOG) and not schemas.endswith(".json"):
        raise UsageError(
            f"schemas={schemas!r}: expected none, log, a .json file of the registry's schemas or a registry "
            "URL http(s)://host[:port][/path]"
        )
    return schemas
