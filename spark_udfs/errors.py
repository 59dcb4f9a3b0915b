"""Errors of the Spark adapters: a partition that cannot be read, named so that a job can leave it out
and go on with the others."""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

from kafka_log_core.errors import KafkaLogError

#: Where the source's warnings go (failOnDataLoss=false: what it read around).
LOG = logging.getLogger("kafka_log.source")

# How the error shows in the text of the Spark exception that carries it (a Python traceback).
_IN_TEXT = re.compile(
    r"PartitionReadError: \[(?P<topic>[^\]\s]+)-(?P<partition>[0-9]+) in (?P<log_dir>[^\]]*)\] (?P<reason>[^\n]*)"
)


class PartitionReadError(KafkaLogError):
    """Reading one partition directory failed (bad data, an unreadable file): ``[topic-p in dir] why``."""

    @classmethod
    def wrap(cls, topic: str, partition: int, log_dir: str, err: BaseException) -> PartitionReadError:
        return cls(f"[{topic}-{partition} in {log_dir}] {err}")


class DataLossError(KafkaLogError):
    """A read would skip or repeat records: a batch cut short, a CRC mismatch, offsets going backwards
    (failOnDataLoss=true)."""


class FailedPartition(NamedTuple):
    topic: str
    partition: int
    log_dir: str
    reason: str


def failed_partition(text: str) -> FailedPartition | None:
    """The partition and reason of the first PartitionReadError in an error's text."""
    found = _IN_TEXT.search(text)
    if found is None:
        return None
    return FailedPartition(found["topic"], int(found["partition"]), found["log_dir"], found["reason"].strip())
