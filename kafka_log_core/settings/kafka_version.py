"""Which Kafka release's rules apply to a log dir, and what those rules are.

The release comes, in this order, from:

1. the cluster metadata log's ``metadata.version`` feature level (``FeatureLevelRecord``), mapped to the
   release that introduced it by Kafka's ``MetadataVersion`` table below. A feature level names a minor
   release (``3.9-IV0`` -> 3.9) and is a lower bound: brokers of a later release may run at an older
   level until it is raised, so an explicit ``--kafka-version`` of a later release refines it (an
   earlier one contradicts the log dir and is refused);
2. ``meta.properties``: ``version=0`` is written only by ZooKeeper-mode brokers, i.e. Kafka 3.x or older
   (4.0 removed ZooKeeper); ``version=1`` is KRaft, which says nothing about the release;
3. ``--kafka-version``;
4. otherwise the newest release the tool knows (``LATEST``), said so in a note.

Rules that differ between the releases we cover (3.6 to 4.4), each checked against that release's
jars from Maven Central (the ``ConfigDef`` validators and the cleaner's methods):

* ``log.segment.bytes`` (broker): at least 14 bytes before 4.0, at least 1 MiB from 4.0 (KIP-1030).
* ``segment.bytes`` (topic): at least 14 bytes up to 4.0.x, at least 1 MiB from 4.1 (KAFKA-19080;
  4.0 kept the old topic-level bound).
* ``internal.segment.bytes`` (topic, undocumented, no bounds): exists from 4.1 and, when set, replaces
  ``segment.bytes`` as the segment size (roll size and the cleaner's grouping limit).
* The cleaner keeps the last batch of a cleaning round as an empty batch (KAFKA-17076, spec rule R2.2)
  from 4.0, and in 3.9 from 3.9.2 on (backport); 3.9.0, 3.9.1 and every older release drop it. A
  ``metadata.version`` cannot tell 3.9 patch releases apart, so 3.9 means 3.9.0 unless
  ``--kafka-version 3.9.2`` says otherwise. From 4.4 (KAFKA-20452; not in 4.3.1, 4.2.2, 4.1.2, 4.0.2
  or 3.9.2) the batch kept is the one ending at the partition's high watermark, not at the round's
  upper bound (``Cleaner.cleanInto`` is given ``log.highWatermark()``): a round that stops below the
  high watermark (an open transaction, ``min.compaction.lag.ms``) keeps no empty batch at its end.
* ``__share_group_state`` (share groups) exists from 4.0; Kafka creates it with ``retention.ms=-1``
  from 4.1 (4.0 left the broker default).
* ``max.decompressed.message.bytes`` (topic; broker synonym of the same name) exists from 4.4: the
  largest decompressed record body the cleaner accepts in a compressed batch; a larger one fails the
  cleaning of that partition.
* Topic settings ``remote.copy.lag.ms``, ``remote.copy.lag.bytes`` (broker ``log.remote.copy.lag.*``)
  and ``errors.deadletterqueue.group.enable`` exist from 4.4 (tiered storage and share groups: not
  used offline).

Not modelled: 4.4 reads a ``.txnindex`` entry's version as an int16 and fails the log dir's loading on
any value but 0; 4.3 and older read only its first byte (signed) and refuse values above 0. The reader
(``format.txn_index``) follows the older reading for every release. 4.4 also bounds the records its
timestamp lookups decompress by ``max.decompressed.message.bytes``; the ``offsets`` job does not (it bounds
each batch it decompresses by ``--max-decompressed-batch-bytes`` only).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kafka_log_core.errors import UsageError

MiB = 1024 * 1024
LEGACY_RECORD_OVERHEAD_V0 = 14  # the lower bound of segment.bytes before KIP-1030


class KafkaVersion(NamedTuple):
    """A Kafka release: ``patch`` is None when only the minor release is known (from metadata.version)."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str) -> KafkaVersion:
        match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
        if not match:
            raise UsageError(
                f"--kafka-version {text!r}: expected MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 3.9.1"
            )
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), None if patch is None else int(patch))

    @property
    def minor_release(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        """Whether this release is ``major.minor.patch`` or later (an unknown patch counts as .0)."""
        return (self.major, self.minor, self.patch or 0) >= (major, minor, patch)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}" + ("" if self.patch is None else f".{self.patch}")


#: The newest release whose rules the tool knows, and the oldest it is verified against.
LATEST = KafkaVersion(4, 4)
OLDEST_COVERED = KafkaVersion(3, 6)

# Kafka's MetadataVersion: feature level -> (release, internal version). A level names the release that
# made it a production level. Levels 1-6 are from releases that later Kafka versions no longer list; 34
# (4.5-IV0) is the testing level of 4.4 (unstable.feature.versions.enable), whose production levels are
# 31 to 33.
METADATA_VERSIONS: dict[int, tuple[KafkaVersion, str]] = {
    level: (KafkaVersion(int(name[0]), int(name[2])), name[4:])
    for level, name in enumerate(
        (
            "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0",
            "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1",
            "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2",
            "4.0-IV3", "4.1-IV0", "4.1-IV1", "4.2-IV0", "4.2-IV1", "4.3-IV0", "4.4-IV0", "4.4-IV1",
            "4.4-IV2", "4.5-IV0",
        ),
        start=1,
    )
}  # fmt: skip


def metadata_version_name(level: int) -> str:
    known = METADATA_VERSIONS.get(level)
    return f"level {level}" if known is None else f"{known[0]}-{known[1]} (level {level})"


def release_of_metadata_version(level: int) -> KafkaVersion | None:
    """The release that introduced ``metadata.version`` feature level ``level`` (None if unknown)."""
    known = METADATA_VERSIONS.get(level)
    return None if known is None else known[0]


# --- the rules ---------------------------------------------------------------------------------------------


def broker_segment_bytes_min(version: KafkaVersion) -> int:
    return MiB if version.at_least(4, 0) else LEGACY_RECORD_OVERHEAD_V0


def topic_segment_bytes_min(version: KafkaVersion) -> int:
    return MiB if version.at_least(4, 1) else LEGACY_RECORD_OVERHEAD_V0


# Settings of a later release than the oldest covered: name -> the release that introduced it. A release
# without the setting treats its name as Kafka would an unknown one.
SETTINGS_SINCE: dict[str, tuple[int, int]] = {
    "internal.segment.bytes": (4, 1),
    "max.decompressed.message.bytes": (4, 4),  # topic, and broker under the same name
    "remote.copy.lag.ms": (4, 4),
    "remote.copy.lag.bytes": (4, 4),
    "log.remote.copy.lag.ms": (4, 4),
    "log.remote.copy.lag.bytes": (4, 4),
    "errors.deadletterqueue.group.enable": (4, 4),
}


def has_setting(name: str, version: KafkaVersion) -> bool:
    """Whether Kafka ``version`` knows the setting ``name`` (any name not in ``SETTINGS_SINCE`` is 3.6's)."""
    since = SETTINGS_SINCE.get(name)
    return since is None or version.at_least(*since)


def keeps_last_batch_of_round(version: KafkaVersion) -> bool:
    """KAFKA-17076 (spec rule R2.2): in 4.0 and later, and in 3.9.2 and later 3.9 releases."""
    return version.at_least(4, 0) or (version.minor_release == (3, 9) and version.at_least(3, 9, 2))


def kept_batch_end(version: KafkaVersion, round_upper_bound: int, high_watermark: int) -> int:
    """Rule R2.2: a batch whose next offset is this is kept, as an empty batch if nothing in it survives
    (-1: ``version`` has no such rule). The round's upper bound (KAFKA-17076); from 4.4 the high
    watermark (KAFKA-20452)."""
    if not keeps_last_batch_of_round(version):
        return -1
    return high_watermark if version.at_least(4, 4) else round_upper_bound


def limits_decompressed_record_size(version: KafkaVersion) -> bool:
    """The cleaner checks each record of a compressed batch against max.decompressed.message.bytes."""
    return has_setting("max.decompressed.message.bytes", version)


def has_share_groups(version: KafkaVersion) -> bool:
    return version.at_least(4, 0)
