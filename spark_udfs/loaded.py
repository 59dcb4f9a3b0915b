"""A partition as the broker's log loader would leave it, for reading (issue 24): the log dir of a crashed
broker is read as a broker restarted on it would serve it, with nothing written.

A log dir without ``.kafka_cleanshutdown`` (or a segment without its ``.index``) is recovered by the
broker before it serves anything: torn tails cut, later segments dropped, the high watermark of a
partition whose only replica is this broker raised to the recovered log end offset. The source plans
that recovery in memory (:func:`kafka_log_core.rules.recovery.plan_recovery`, the jobs' own) and reads the
view it gives (:func:`~kafka_log_core.rules.recovery.recovered_view`): segments cut where recovery cuts
them, with the rebuilt indexes. Reading the files as they are would stop at a stale high watermark or
serve a crash tail the broker never will.

The same non-destructive default as the jobs: where the loader's rule would delete valid batches (bit
rot, a damaged copy: not a crash tail), or where the broker would refuse to load the partition, the read
fails with that line (``failOnDataLoss=true``), or reads the files as they are around what cannot be read,
with that line as a warning (``false``). A log dir a running broker holds is read as it is (the broker
recovered it). Segment settings are Kafka's defaults: they only shape the rebuilt indexes, which the read
uses to find positions.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core.errors import CorruptDataError, KafkaLogError, RefusedError
from kafka_log_core.format.checkpoints import read_meta_properties
from kafka_log_core.log import locks
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.rules import recovery
from kafka_log_core.settings.cluster_metadata import (
    ClusterMetadata,
    ClusterView,
    find_metadata_log,
    read_cluster_metadata,
)
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from spark_udfs.errors import LOG, DataLossError

META_PROPERTIES = "meta.properties"


@dataclass(frozen=True)
class Loaded:
    """The partition to read, and -- when recovery changed what a broker would serve -- why the read
    ends where it does (a job's result row says it)."""

    log: PartitionLog
    note: str | None = None


class Clusters:
    """Each log dir's cluster metadata (replicas, this broker's node id), read once, when a partition of a
    crashed log dir needs its high watermark rule; a JBOD broker's metadata log lives in one of its dirs."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self.log_dirs = log_dirs
        self._views: dict[str, ClusterView | None] = {}
        self._read: dict[Path, ClusterMetadata] = {}
        #: Each partition as loaded, by (log dir, partition, failOnDataLoss): planned once per instance.
        self.loaded: dict[tuple[str, object, bool], Loaded] = {}

    def view(self, log_dir: str) -> ClusterView | None:
        if log_dir not in self._views:
            self._views[log_dir] = self._view(Path(log_dir))
        return self._views[log_dir]

    def _view(self, log_dir: Path) -> ClusterView | None:
        try:
            meta_path = log_dir / META_PROPERTIES
            node_id = read_meta_properties(meta_path).node_id if meta_path.exists() else None
            for candidate in [log_dir, *self.log_dirs]:
                found = find_metadata_log(candidate)
                if found is not None:
                    if found not in self._read:
                        self._read[found] = read_cluster_metadata(found)
                    return self._read[found].view(node_id)
        except (KafkaLogError, OSError) as err:
            LOG.warning("kafka-log: %s: cluster metadata unreadable (%s): replicas unknown", log_dir, err)
        return None


def open_as_loaded(source, fail_on_data_loss: bool, clusters: Clusters) -> Loaded:
    """``source`` (a listing.PartitionTask) as the loader would leave it; see the module docstring. Opened
    (a crashed dir's recovery planned) once per ``clusters``: a job that looks at a partition several
    times on its driver (its state, the check, the write's plan) pays for it once."""
    key = (os.fspath(source.log_dir), source.tp, fail_on_data_loss)
    found = clusters.loaded.get(key)
    if found is None:
        found = clusters.loaded[key] = _open_as_loaded(source, fail_on_data_loss, clusters)
    return found


def _open_as_loaded(source, fail_on_data_loss: bool, clusters: Clusters) -> Loaded:
    directory = Path(source.log_dir) / source.tp.dir_name
    ckpt = source.checkpoints
    as_is = PartitionLog.open(source.log_dir, source.tp, ckpt)
    if recovery.nothing_to_load(directory, ckpt) or locks.broker_holds(source.log_dir):
        return Loaded(as_is)
    try:
        plan = recovery.plan_recovery(
            directory, source.tp, ckpt, LogConfig(), now_ms=int(time.time() * 1000),
            producer_id_expiration_ms=BrokerConfig().producer_id_expiration_ms,
        )  # fmt: skip
    except (RefusedError, CorruptDataError) as err:
        return _not_loadable(source, f"{err}", fail_on_data_loss, as_is)
    if not plan.ran:
        return Loaded(as_is)
    if plan.destroys_valid_data:
        lost = plan.valid_data_lost.describe()
        problem = f"{plan.losses[0].describe()}; the broker's recovery would delete {lost}"
        return _not_loadable(source, problem, fail_on_data_loss, as_is)
    hw, hw_note = recovery.high_watermark_after(
        plan, source.tp, ckpt.high_watermark, clusters.view(os.fspath(source.log_dir))
    )
    view = recovery.recovered_view(as_is, plan, plan.checkpoints_after(ckpt, hw))
    return Loaded(view, f"read as the broker's log loader would leave it ({plan.describe()}); {hw_note}")


def _not_loadable(source, problem: str, fail_on_data_loss: bool, as_is: PartitionLog) -> Loaded:
    if fail_on_data_loss:
        raise DataLossError(
            f"{problem}: the partition cannot be read as a broker restarted on this log dir would serve it "
            "(failOnDataLoss=false reads the files as they are, around what cannot be read)"
        )
    LOG.warning("kafka-log: %s: %s; failOnDataLoss=false: read the files as they are", source.tp, problem)
    return Loaded(as_is, f"{problem}; failOnDataLoss=false: read the files as they are")
