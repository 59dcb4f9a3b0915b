"""Test helper: lay out segments batch by batch with exact boundaries. Records are given as plain tuples.

What it builds with is the format layer of this code base: batches come from ``record_batch.build_batch``
and the indexes from ``IndexBuilder`` (the broker's rule). Those two are pinned on their own against code
nobody here wrote (kafka-python's codec and the spec's hex in tests/format/test_record_batch.py; the
broker's index rule in tests/format/test_offset_index.py). So the layouts are independent of the
cleaning, retention, recovery and job code the tests check, not of the format layer; a test of the
format itself builds its input with kafka-python instead."""

from __future__ import annotations

import struct
from pathlib import Path

from kafka_log_core.format import checkpoints, record_batch
from kafka_log_core.format.filenames import TopicPartition, segment_file
from kafka_log_core.format.record_batch import Header, Record
from kafka_log_core.log.index_builder import IndexBuilder

TS = 1_700_000_000_000


def batch(base, kvs, *, ts=TS, codec=0, pid=-1, epoch=-1, seq=-1, txn=False, step=1, **kw):
    """kvs: list of (key, value) or (key, value, headers); offsets base, base+step, ..."""
    recs = []
    for i, kv in enumerate(kvs):
        k, v = kv[0], kv[1]
        hdrs = tuple(Header(a, b) for a, b in (kv[2] if len(kv) > 2 else ()))
        k = k.encode() if isinstance(k, str) else k
        v = v.encode() if isinstance(v, str) else v
        recs.append(Record(base + i * step, ts + i, k, v, hdrs))
    return record_batch.build_batch(
        base,
        recs,
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
        **kw,
    )


def marker(base, commit, pid, epoch=0, ts=TS):
    ctype = record_batch.CONTROL_COMMIT if commit else record_batch.CONTROL_ABORT
    return record_batch.build_control_batch(base, ctype, producer_id=pid, producer_epoch=epoch, timestamp=ts)


def write_segment(directory: Path, base: int, batches: list[bytes], *, interval: int = 4096, mtime_ms=None):
    directory.mkdir(parents=True, exist_ok=True)
    builder = IndexBuilder(base, index_interval_bytes=interval)
    pos = 0
    from kafka_log_core.format import log_file

    data = b"".join(batches)
    for b in log_file.iter_batches(data):
        builder.append(b.position, b.last_offset, b.max_timestamp)
        pos += b.size_in_bytes
    offsets, times = builder.finish()
    segment_file(directory, base, ".log").write_bytes(data)
    segment_file(directory, base, ".index").write_bytes(offsets.encode())
    segment_file(directory, base, ".timeindex").write_bytes(times.encode())
    if mtime_ms is not None:
        import os

        for suffix in (".log", ".index", ".timeindex"):
            os.utime(segment_file(directory, base, suffix), ns=(mtime_ms * 10**6, mtime_ms * 10**6))


def make_log(
    log_dir: Path, topic: str, partition: int, segments: dict[int, list[bytes]], *, hw=None, clean_shutdown=False,
    **kw,
):  # fmt: skip
    """segments: base offset -> batches. Writes the partition dir and (optionally) the HW checkpoint.
    Without ``clean_shutdown`` the log dir has no ``.kafka_cleanshutdown``: the jobs recover it from the
    recovery points first, as a broker would after a crash."""
    d = log_dir / f"{topic}-{partition}"
    for base, batches in segments.items():
        write_segment(d, base, batches, **kw)
    if clean_shutdown:
        mark_clean_shutdown(log_dir)
    if hw is not None:
        checkpoints.write_offset_checkpoint(
            log_dir / "replication-offset-checkpoint", {TopicPartition(topic, partition): hw}
        )
    return d


def mark_clean_shutdown(log_dir: Path) -> None:
    """``.kafka_cleanshutdown`` as a Kafka 3.7+ broker writes it on a clean stop (the broker skips recovery)."""
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')


def read_records(directory: Path):
    """(offset, key, value) of every record in the partition dir, via kafka-python's decoder."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    for log in sorted(directory.glob("*.log")):
        mr = MemoryRecords(log.read_bytes())
        while True:
            b = mr.next_batch()
            if b is None:
                break
            for r in b:
                out.append((r.offset, r.key, r.value))
    return out


def with_partition_leader_epoch(batch: bytes, epoch: int) -> bytes:
    """Set the leader epoch in place; it lies outside the CRC, so the CRC stays valid."""
    out = bytearray(batch)
    struct.pack_into(">i", out, record_batch.PARTITION_LEADER_EPOCH_OFFSET, epoch)
    return bytes(out)
