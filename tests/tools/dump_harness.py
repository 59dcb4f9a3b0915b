"""The dump tests' shared parts: the spec's example batch (§14, copied by hand), the command run in-process,
segment files written by name, and Kafka's line format and checksums worked out here (zlib, crc32c), never
by the dump code.
"""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

from click.testing import CliRunner

from jobs.cli import main
from kafka_log_core.format import record_batch
from kafka_log_core.format.record_batch import Record

TS = 1_700_000_000_000  # 0x18BCFE56800, the spec's example timestamp
BATCH = (
    "baseOffset: {base} lastOffset: {last} count: {count} baseSequence: {seq} lastSequence: {last_seq} "
    "producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: {ple} isTransactional: {txn} "
    "isControl: {ctl} deleteHorizonMs: {horizon} position: {pos} {ts_type}: {max_ts} size: {size} "
    "magic: 2 compresscodec: {codec} crc: {crc} isvalid: {valid}"
)
V2_DEFAULTS = dict(
    seq=-1, last_seq=-1, pid=-1, epoch=-1, ple=-1, txn="false", ctl="false", horizon="OptionalLong.empty",
    ts_type="CreateTime", codec="none", valid="true",
)  # fmt: skip


def spec_hex(text: str) -> bytes:
    """The spec's hex notation: spaces and '|' ignored, ``FF×8`` = eight FF bytes."""
    text = re.sub(r"([0-9A-F]{2})×(\d+)", lambda m: " ".join([m.group(1)] * int(m.group(2))), text)
    return bytes.fromhex(text.replace("|", " "))


E1 = spec_hex(
    "00 00 00 00 00 00 00 00 | 00 00 00 3A | 00 00 00 00 | 02 | E9 9B 8D D8 | 00 00 | 00 00 00 00"
    "00 00 01 8B CF E5 68 00 | 00 00 01 8B CF E5 68 00 | FF FF FF FF FF FF FF FF | FF FF | FF FF FF FF"
    "00 00 00 01 | 10 00 00 00 02 6B 02 76 00"
)
E2 = spec_hex(
    "00 00 00 00 00 00 00 64 00 00 00 46 00 00 00 03 02 90 EA 4F 03 00 00 00 00 00 01"
    "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 05 FF×8 FF FF FF FF FF FF 00 00 00 02"
    "10 00 00 00 02 61 02 31 00 16 00 0A 02 02 62 01 02 02 68 02 78"
)
E3 = spec_hex(
    "00 00 00 00 00 00 00 64 00 00 00 4C 00 00 00 03 02 3C 8F 44 DC 00 40 00 00 00 01"
    "00 00 01 8B D5 0D 4A A0 00 00 01 8B CF E5 68 05 FF×8 FF FF FF FF FF FF 00 00 00 02"
    "16 00 BF 8A BF 52 00 02 61 02 31 00 1C 00 B5 8A BF 52 02 02 62 01 02 02 68 02 78"
)
E4 = spec_hex(
    "00 00 00 00 00 00 00 C8 00 00 00 42 00 00 00 03 02 FC 84 B0 34 00 30 00 00 00 00"
    "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 00 00 00 00 00 00 00 03 E8 00 00 FF FF FF FF"
    "00 00 00 01 20 00 00 00 08 00 00 00 01 0C 00 00 00 00 00 05 00"
)
E5 = spec_hex(
    "00 00 00 00 00 00 01 2C 00 00 00 31 00 00 00 03 02 A5 BF F9 C1 00 00 00 00 00 04"
    "FF FF FF FF FF FF FF FF 00 00 01 8B CF E5 68 00 00 00 00 00 00 00 00 07 00 02 00 00 00 0A 00 00 00 00"
)
E6_V1 = spec_hex(
    "00 00 00 00 00 00 00 00 00 00 00 18 39 26 8C 33 01 00 00 00 01 8B CF E5 68 00 00 00 00 01 6B 00 00 00 01 76"
)
E6_V0 = spec_hex("00 00 00 00 00 00 00 05 00 00 00 10 1F EC D7 0A 00 00 00 00 00 01 6B 00 00 00 01 76")
E8 = spec_hex(
    "00 00 00 00 00 00 00 00 03 E8 00 00 00 00 00 00 00 96 00 00 00 00 00 00 00 A0 00 00 00 00 00 00 00 A1"
)
E9_EMPTY = spec_hex("00 01 48 67 4B C7 00 00 00 00")
E9_ONE = spec_hex(
    "00 01 E1 CC 78 93 00 00 00 01 00 00 00 00 00 00 03 E8 00 00 00 00 00 04 00 00 00 00 00 00 00 CC 00 00 00 04"
    "00 00 01 8B CF E5 68 00 FF FF FF FF FF FF FF FF FF FF FF FF"
)


# ---------------------------------------------------------------------------------------------- helpers
def run_dump(*args: object):
    result = CliRunner().invoke(main, ["dump", *map(str, args)])
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def write(directory: Path, name: str, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(data)
    return path


def segment_name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def v2_line(**fields: object) -> str:
    return BATCH.format(**{**V2_DEFAULTS, **fields})


def stored_crc(batch: bytes) -> int:
    return struct.unpack_from(">I", batch, 17)[0]


def legacy_crc(magic: int, timestamp: int | None, key: bytes | None, value: bytes | None) -> int:
    """CRC32 of a legacy message from its magic byte on, written out field by field."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return zlib.crc32(body)


def control_batch(offset: int, ctype: int, value: bytes, *, key_version: int = 0) -> bytes:
    key = struct.pack(">hh", key_version, ctype)
    return record_batch.build_batch(
        offset, [Record(offset, TS, key, value)], is_control=True, partition_leader_epoch=1
    )


def compact_string(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data
