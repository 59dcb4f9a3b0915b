"""Test helper: KRaft metadata records and ``__cluster_metadata-0`` directories, encoded by hand from
Kafka's message definitions (metadata/src/main/resources/common/metadata/*.json) -- independent of the
decoder under test. Record batches come from logbuild (the batch format is tested on its own)."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

from kafka_log_core.format import record_batch
from kafka_log_core.format.record_batch import Record
from tests.logbuild import TS, write_segment


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return uvarint(len(data) + 1) + data


def int32s(values) -> bytes:
    if values is None:
        return b"\x00"
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def uuid(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def tagged(*fields: tuple[int, bytes]) -> bytes:
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


def frame(api_key: int, version: int, body: bytes) -> bytes:
    return uvarint(1) + uvarint(api_key) + uvarint(version) + body


def topic_record(name: str, topic_id: str) -> bytes:
    return frame(2, 0, string(name) + uuid(topic_id) + tagged())


def partition_record(topic_id: str, partition: int, replicas, isr, leader: int, *, version: int = 0,
                     tags: tuple = ()) -> bytes:  # fmt: skip
    body = (
        struct.pack(">i", partition)
        + uuid(topic_id)
        + int32s(replicas)
        + int32s(isr)
        + int32s([])
        + int32s([])
    )
    body += struct.pack(">iii", leader, 5, 7)  # leader, leader epoch, partition epoch
    if version >= 1:
        body += uvarint(len(replicas) + 1) + b"\x00" * 16 * len(replicas)  # directories
    return frame(3, version, body + tagged(*tags))


def config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    return frame(
        4, 0, struct.pack(">b", resource_type) + string(resource) + string(name) + string(value) + tagged()
    )


def partition_change(
    topic_id: str, partition: int, *, isr=None, leader: int | None = None, replicas=None
) -> bytes:
    fields = []
    if isr is not None:
        fields.append((0, int32s(isr)))
    if leader is not None:
        fields.append((1, struct.pack(">i", leader)))
    if replicas is not None:
        fields.append((2, int32s(replicas)))
    return frame(5, 0, struct.pack(">i", partition) + uuid(topic_id) + tagged(*fields))


def remove_topic(topic_id: str) -> bytes:
    return frame(9, 0, uuid(topic_id) + tagged())


def feature_level(name: str, level: int) -> bytes:
    return frame(12, 0, string(name) + struct.pack(">h", level) + tagged())


def begin_txn() -> bytes:
    return frame(23, 0, tagged())


def end_txn() -> bytes:
    return frame(24, 0, tagged())


def abort_txn() -> bytes:
    return frame(25, 0, tagged())


def no_op() -> bytes:
    return frame(20, 0, tagged())


def metadata_batch(base: int, values: list[bytes]) -> bytes:
    return record_batch.build_batch(base, [Record(base + i, TS + i, None, v) for i, v in enumerate(values)])


def control_batch(base: int, ctype: int) -> bytes:
    """A control batch as KRaft writes them (snapshot header/footer, leader change): skipped by readers."""
    key = struct.pack(">hh", 0, ctype)
    return record_batch.build_batch(base, [Record(base, TS, key, b"\x00\x00\x00")], is_control=True)


def write_snapshot(directory: Path, end_offset: int, epoch: int, values: list[bytes]) -> Path:
    """``<end offset>-<epoch>.checkpoint``: header, the records, footer (offsets from 0, as Kafka writes)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{end_offset:020d}-{epoch:010d}.checkpoint"
    data = control_batch(0, 3) + metadata_batch(1, values) + control_batch(1 + len(values), 4)
    path.write_bytes(data)
    return path


def write_metadata_log(directory: Path, segments: dict[int, list[list[bytes]]]) -> None:
    """base offset -> batches (each a list of record values), contiguous offsets."""
    for base, batches in segments.items():
        encoded, offset = [], base
        for values in batches:
            encoded.append(metadata_batch(offset, values))
            offset += len(values)
        write_segment(directory, base, encoded)


def write_meta_properties(log_dir: Path, *, cluster_id: str = "Q1T14e0ESROO3ruypoOXLg", node_id: int = 1,
                          version: int = 1) -> None:  # fmt: skip
    log_dir.mkdir(parents=True, exist_ok=True)
    key = "node.id" if version == 1 else "broker.id"
    (log_dir / "meta.properties").write_text(
        f"#\nversion={version}\n{key}={node_id}\ncluster.id={cluster_id}\n"
    )
