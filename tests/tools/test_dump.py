"""`kafka-log-jobs dump` prints what Kafka 4.x's kafka-dump-log prints.

Expected lines are written out here by hand in Kafka's format (field names, order and wording read from
DumpLogSegments): numbers come from the spec's hex examples (§14, copied by hand), from the bytes a test
wrote, or from zlib/crc32c over them, never from the dump code. The `broker` tests run Kafka's own
DumpLogSegments (tests/kafka_harness.py) on the same files and compare the output line by line.
"""

from __future__ import annotations

import random
import re
import struct
import zlib
from pathlib import Path

import crc32c
import pytest
from click.testing import CliRunner
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from jobs.cli import main
from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import log_file, offset_index, record_batch, time_index, txn_index
from kafka_log_core.format.legacy_records import LegacyRecord, encode_message, encode_wrapper
from kafka_log_core.format.offset_index import OffsetPosition
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafka_log_core.format.record_batch import Header, Record
from kafka_log_core.format.time_index import TimestampOffset
from kafka_log_core.javacompat import JavaHashMap, java_string_hash
from kafka_log_core.log.index_builder import IndexBuilder
from kafka_log_core.tools.dump import DumpedFile, LogReader, _utf8

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


# ---------------------------------------------------------------------------------------------- .log
def test_v2_batch_line_has_kafkas_fields_in_kafkas_order(tmp_path):
    log = write(tmp_path, segment_name(0, ".log"), E1)
    result = run_dump("--files", log)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"Dumping {log}",
        "Log starting offset: 0",
        v2_line(base=0, last=0, count=1, ple=0, pos=0, max_ts=TS, size=70, crc=0xE99B8DD8),
    ]
    assert result.stderr == ""


def test_deep_iteration_prints_sequence_header_keys_and_data_log_prints_key_and_payload(tmp_path):
    log = write(tmp_path, segment_name(100, ".log"), E2)
    assert run_dump("--files", log, "--deep-iteration").stdout.splitlines()[3:] == [
        f"| offset: 100 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: -1 headerKeys: []",
        f"| offset: 101 CreateTime: {TS + 5} keySize: 1 valueSize: -1 sequence: -1 headerKeys: [h]",
    ]
    result = run_dump("--files", log, "--print-data-log")  # implies --deep-iteration
    assert result.stdout.splitlines() == [
        f"Dumping {log}",
        "Log starting offset: 100",
        v2_line(base=100, last=101, count=2, ple=3, pos=0, max_ts=TS + 5, size=82, crc=0x90EA4F03),
        f"| offset: 100 CreateTime: {TS} keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: a payload: 1",
        f"| offset: 101 CreateTime: {TS + 5} keySize: 1 valueSize: -1 sequence: -1 headerKeys: [h] key: b",
    ]


def test_deep_iteration_reports_offsets_that_do_not_follow_the_previous_one(tmp_path):
    # Kafka starts counting at -1, so a segment that does not start at offset 0 is reported too.
    batches = E2 + record_batch.build_batch(105, [Record(105, TS, b"x", b"y"), Record(107, TS, b"z", b"w")])
    log = write(tmp_path, segment_name(100, ".log"), batches)
    result = run_dump("--files", log, "--deep-iteration")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"Non-consecutive offsets in {log}",
        "  -1 is followed by 100",
        "  101 is followed by 105",
        "  105 is followed by 107",
    ]


def test_delete_horizon_is_printed_and_records_keep_their_timestamps(tmp_path):
    log = write(tmp_path, segment_name(100, ".log"), E3)
    lines = run_dump("--files", log, "--deep-iteration").stdout.splitlines()
    assert lines[2] == v2_line(
        base=100, last=101, count=2, ple=3, horizon="OptionalLong[1700086500000]", pos=0, max_ts=TS + 5,
        size=88, crc=0x3C8F44DC,
    )  # fmt: skip
    assert [line.split(" keySize")[0] for line in lines[3:]] == [
        f"| offset: 100 CreateTime: {TS}",
        f"| offset: 101 CreateTime: {TS + 5}",
    ]


def test_transaction_marker_prints_its_type_and_coordinator_epoch_and_no_payload(tmp_path):
    log = write(tmp_path, segment_name(200, ".log"), E4)
    assert run_dump("--files", log, "--print-data-log").stdout.splitlines()[2:] == [
        v2_line(
            base=200,
            last=200,
            count=1,
            pid=1000,
            epoch=0,
            ple=3,
            txn="true",
            ctl="true",
            pos=0,
            max_ts=TS,
            size=78,
            crc=0xFC84B034,
        ),  # fmt: skip
        f"| offset: 200 CreateTime: {TS} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5",
    ]


def test_empty_batch_keeps_its_sequence_range_and_prints_no_records(tmp_path):
    log = write(tmp_path, segment_name(300, ".log"), E5)
    assert run_dump("--files", log, "--deep-iteration").stdout.splitlines()[2:] == [
        v2_line(
            base=300,
            last=304,
            count=0,
            seq=10,
            last_seq=14,
            pid=7,
            epoch=2,
            ple=3,
            pos=0,
            max_ts=TS,
            size=61,
            crc=0xA5BFF9C1,
        )  # fmt: skip
    ]


def test_sequences_wrap_from_int_max_to_zero(tmp_path):
    records = [Record(10 + i, TS, b"k", b"v") for i in range(3)]
    data = record_batch.build_batch(10, records, producer_id=4, producer_epoch=0, base_sequence=2**31 - 2)
    log = write(tmp_path, segment_name(10, ".log"), data)
    lines = run_dump("--files", log, "--deep-iteration").stdout.splitlines()
    assert "baseSequence: 2147483646 lastSequence: 0 " in lines[2]
    assert [re.search(r"sequence: (-?\d+)", line).group(1) for line in lines[3:]] == [
        "2147483646",
        "2147483647",
        "0",
    ]


def test_log_append_time_batch_gives_every_record_the_batch_timestamp(tmp_path):
    records = [Record(0, TS, b"a", b"1"), Record(1, TS + 7, b"b", b"2")]
    data = record_batch.build_batch(
        0, records, timestamp_type=record_batch.LOG_APPEND_TIME, max_timestamp=TS + 99
    )
    log = write(tmp_path, segment_name(0, ".log"), data)
    lines = run_dump("--files", log, "--deep-iteration").stdout.splitlines()
    assert f" position: 0 LogAppendTime: {TS + 99} size: {len(data)} " in lines[2]
    assert [line.split(" keySize")[0] for line in lines[3:]] == [
        f"| offset: 0 LogAppendTime: {TS + 99}",
        f"| offset: 1 LogAppendTime: {TS + 99}",
    ]


def test_batch_with_a_wrong_crc_is_printed_as_invalid(tmp_path):
    data = bytearray(record_batch.build_batch(0, [Record(0, TS, b"k", b"value")]))
    data[-3] ^= 0x01  # a byte of the value: covered by the CRC, still decodable
    log = write(tmp_path, segment_name(0, ".log"), bytes(data))
    result = run_dump("--files", log, "--print-data-log")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2].endswith(f"crc: {stored_crc(data)} isvalid: false")
    assert result.stdout.splitlines()[3].endswith("key: k payload: valte")


@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_compressed_batches_from_kafka_python_show_their_codec_and_records(tmp_path, codec, name):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=9, producer_epoch=1,
        base_sequence=5, batch_size=1 << 20,
    )  # fmt: skip
    value = b"v1" * 60  # kafka-python leaves a batch uncompressed unless compression makes it smaller
    builder.append(0, timestamp=TS, key=b"k1", value=value, headers=[("a", b"x"), ("b", None)])
    builder.append(1, timestamp=TS + 3, key=None, value="ünï".encode(), headers=[])
    data = bytearray(builder.build())
    data[0:8] = (40).to_bytes(8, "big")
    log = write(tmp_path, segment_name(40, ".log"), bytes(data))
    assert run_dump("--files", log, "--print-data-log").stdout.splitlines()[2:] == [
        v2_line(
            base=40,
            last=41,
            count=2,
            seq=5,
            last_seq=6,
            pid=9,
            epoch=1,
            ple=0,
            pos=0,
            max_ts=TS + 3,
            size=len(data),
            codec=name,
            crc=stored_crc(data),
        ),  # fmt: skip
        f"| offset: 40 CreateTime: {TS} keySize: 2 valueSize: 120 sequence: 5 headerKeys: [a,b] key: k1 payload: "
        + "v1" * 60,
        f"| offset: 41 CreateTime: {TS + 3} keySize: -1 valueSize: 5 sequence: 6 headerKeys: [] payload: ünï",
    ]


def test_legacy_entries_print_offset_crc_and_validity(tmp_path):
    log = write(tmp_path, segment_name(0, ".log"), E6_V1 + E6_V0)
    assert run_dump("--files", log, "--print-data-log").stdout.splitlines()[2:] == [
        f"offset: 0 position: 0 CreateTime: {TS} size: 36 magic: 1 compresscodec: none crc: {0x39268C33} isvalid: true",
        f"| offset: 0 CreateTime: {TS} keySize: 1 valueSize: 1 isValid: true crc: {0x39268C33} key: k payload: v",
        f"offset: 5 position: 36 NoTimestampType: -1 size: 28 magic: 0 compresscodec: none crc: {0x1FECD70A} "
        "isvalid: true",
        f"| offset: 5 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: {0x1FECD70A} key: k payload: v",
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_legacy_wrapper_lists_its_inner_messages(tmp_path, magic):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=1, batch_size=1 << 20)
    inner = [(None, b"x0"), (b"a", b"x1"), (b"b", None)]
    for i, (key, value) in enumerate(inner):
        builder.append(i, timestamp=TS + i if magic else None, key=key, value=value)
    data = bytearray(builder.build())
    data[0:8] = (12 if magic else 2).to_bytes(8, "big")  # the wrapper carries the last inner offset
    log = write(tmp_path, segment_name(0, ".log"), bytes(data))
    lines = run_dump("--files", log, "--deep-iteration").stdout.splitlines()
    ts_type = "CreateTime" if magic else "NoTimestampType"
    wrapper_ts = struct.unpack_from(">q", data, 18)[0] if magic else -1
    assert lines[2] == (
        f"offset: {12 if magic else 2} position: 0 {ts_type}: {wrapper_ts} size: {len(data)} magic: {magic} "
        f"compresscodec: gzip crc: {struct.unpack_from('>I', data, 12)[0]} isvalid: true"
    )
    first = 10 if magic else 0  # v1 inner offsets are relative to the wrapper, v0 ones absolute
    assert lines[3:] == [
        f"| offset: {first + i} {ts_type}: {TS + i if magic else -1} keySize: {-1 if k is None else len(k)} "
        f"valueSize: {-1 if v is None else len(v)} isValid: true crc: {legacy_crc(magic, TS + i, k, v)}"
        for i, (k, v) in enumerate(inner)
    ]


def test_kraft_control_records_print_kafkas_json(tmp_path):
    voter = (
        struct.pack(">i", 1) + bytes(range(16)) + b"\x02" + compact_string("CONTROLLER")
        + compact_string('h"\\\x01') + struct.pack(">H", 9093) + b"\x00" + struct.pack(">hh", 0, 1) + b"\x00" + b"\x00"
    )  # fmt: skip
    batches = [
        control_batch(0, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00"),
        control_batch(
            1, 2, b"\x00\x00" + struct.pack(">i", 2) + b"\x02" + struct.pack(">i", 2) + b"\x00\x01\x00"
        ),
        control_batch(
            2, 2, b"\x00\x01" + struct.pack(">i", 2) + b"\x02" + struct.pack(">i", 2) + b"\x00\x01\x00"
        ),
        control_batch(3, 5, b"\x00\x00\x00\x01\x00"),
        control_batch(4, 6, b"\x00\x00\x02" + voter + b"\x01\x07\x02zz"),  # one unknown tagged field
        control_batch(5, 4, b"\x00\x00\x00"),
        control_batch(6, 17, b"?"),
    ]
    path = write(tmp_path, "00000000000000000007-0000000003.checkpoint", b"".join(batches))
    lines = run_dump("--files", path, "--print-data-log").stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 7, epoch: 3"
    assert [line.split("headerKeys: [] ")[1] for line in lines[3::2]] == [
        f'SnapshotHeader {{"version":0,"lastContainedLogTimestamp":{TS}}}',
        'LeaderChange: {"version":0,"leaderId":2,"voters":[{"voterId":2}],"grantingVoters":[]}',
        'LeaderChange: {"version":1,"leaderId":2,"voters":[{"voterId":2,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}],'
        '"grantingVoters":[]}',
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAECAwQFBgcICQoLDA0ODw","endpoints":'
        '[{"name":"CONTROLLER","host":"h\\"\\\\\\u0001","port":9093}],"kRaftVersionFeature":'
        '{"minSupportedVersion":0,"maxSupportedVersion":1}}]}',
        'SnapshotFooter {"version":0}',
        "controlType: UNKNOWN(17)",
    ]


def test_skip_record_metadata_prints_only_data_and_blank_lines_for_control_records(tmp_path):
    log = write(tmp_path, segment_name(100, ".log"), E2 + E4)
    lines = run_dump("--files", log, "--print-data-log", "--skip-record-metadata").stdout.splitlines()
    assert lines[3:5] == ["| key: a payload: 1", "| key: b"]
    assert lines[6] == ""  # the marker's record line


@pytest.mark.parametrize(
    "raw,text",
    [
        # What Java 17's new String(bytes, UTF_8) returned for these bytes (run once by hand).
        (b"a\xed\xa0\x80b", "a\ufffdb"),  # an encoded surrogate is one U+FFFD (Python: three)
        (b"\xe2\x82", "\ufffd"),
        (b"\xe2\x82A", "\ufffdA"),
        (b"\xf0\x9f\x98", "\ufffd"),
        (b"\xf0\x9f\x98A", "\ufffdA"),
        (b"\xc0\x80", "\ufffd\ufffd"),
        (b"\xe0\xa0", "\ufffd"),
        (b"\xf4\x90\x80\x80", "\ufffd" * 4),
        (b"\xff", "\ufffd"),
        ("héllo €".encode(), "héllo €"),
    ],
)
def test_payloads_are_decoded_like_javas_utf8_decoder(raw, text):
    assert _utf8(raw) == text


def test_partial_batch_at_the_end_gets_kafkas_line_and_fails_the_command(tmp_path):
    log = write(tmp_path, segment_name(0, ".log"), E1 + E1[:30])
    result = run_dump("--files", log)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[2:] == [
        v2_line(base=0, last=0, count=1, ple=0, pos=0, max_ts=TS, size=70, crc=0xE99B8DD8),
        f"Found 30 invalid bytes at the end of {log.name}",
    ]
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {log} at position 70: ")


def test_max_bytes_stops_before_the_first_batch_that_does_not_fit_without_complaint(tmp_path):
    log = write(tmp_path, segment_name(0, ".log"), E1 + E1[:30])
    result = run_dump("--files", log, "--max-bytes", 100)
    assert result.exit_code == 0 and result.stderr == ""
    assert len(result.stdout.splitlines()) == 3
    result = run_dump("--files", log, "--max-bytes", 69)
    assert result.exit_code == 0 and result.stdout.splitlines() == [
        f"Dumping {log}",
        "Log starting offset: 0",
    ]


def test_corrupt_file_gets_one_error_line_and_the_other_files_are_still_dumped(tmp_path):
    bad = write(tmp_path / "a", segment_name(0, ".log"), E1 + bytes(40))  # preallocated zeros: size 0
    good = write(tmp_path / "b", segment_name(100, ".log"), E2)
    result = run_dump("--files", f"{bad},{good}")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {bad} at position 70: record size 0 is smaller than the minimum record overhead (14)"
    ]
    assert result.stdout.splitlines() == [
        f"Dumping {bad}",
        "Log starting offset: 0",
        v2_line(base=0, last=0, count=1, ple=0, pos=0, max_ts=TS, size=70, crc=0xE99B8DD8),
        f"Dumping {good}",
        "Log starting offset: 100",
        v2_line(base=100, last=101, count=2, ple=3, pos=0, max_ts=TS + 5, size=82, crc=0x90EA4F03),
    ]


def test_undecodable_compressed_records_name_the_file_and_the_batch_position(tmp_path):
    data = bytearray(record_batch.build_batch(5, [Record(5, TS, b"k", b"v" * 50)], codec=1))
    data[-12:-4] = b"\x00" * 8  # damage the gzip stream, then fix the CRC so only decoding fails
    data[17:21] = struct.pack(">I", crc32c.crc32c(bytes(data[21:])))
    log = write(tmp_path, segment_name(0, ".log"), E1 + bytes(data))
    result = run_dump("--files", log, "--deep-iteration")
    assert result.exit_code == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {log} at position 70: ")
    assert result.stdout.splitlines()[-1].startswith("baseOffset: 5 lastOffset: 5 ")


def test_log_read_in_small_windows_gives_the_batches_and_positions_of_the_whole_file(tmp_path):
    big = record_batch.build_batch(1, [Record(1, TS, b"k", bytes(300))])  # larger than the window
    data = E1 + big + E2 + E4 + E5 + E1[:40]
    log = write(tmp_path, segment_name(0, ".log"), data)
    whole = [(b.position, b.last_offset, bytes(b.data)) for b in log_file.iter_batches(data)]
    with LogReader(log) as reader:
        assert [(b.position, b.last_offset, bytes(b.data)) for b in reader.batches(window=100)] == whole
        assert [b.position for b in reader.batches(start=whole[2][0], window=90)] == [
            p for p, *_ in whole[2:]
        ]


def test_log_read_in_windows_reports_corruption_at_its_position_in_the_file(tmp_path):
    data = E1 + E2 + bytes(30)
    log = write(tmp_path, segment_name(0, ".log"), data)
    with LogReader(log) as reader, pytest.raises(CorruptRecordError, match="record size 0") as caught:
        list(reader.batches(window=100))
    assert (caught.value.path, caught.value.position) == (str(log), len(E1) + len(E2))


# ---------------------------------------------------------------------------------------------- indexes
@pytest.fixture
def indexed_segment(tmp_path):
    """Four batches at base offset 0 and the index entries the broker would write with a 100-byte interval."""
    batches = [
        record_batch.build_batch(0, [Record(0, TS + 1000, b"k", b"v")]),
        record_batch.build_batch(
            1, [Record(1, TS + 1005, b"k", b"v" * 40), Record(2, TS + 1002, b"k", b"w")]
        ),
        record_batch.build_batch(3, [Record(3, TS + 1003, b"k", b"v" * 40)]),
        record_batch.build_batch(4, [Record(4 + i, TS + 1010 - i, b"k", b"v" * 30) for i in range(6)]),
    ]
    positions = [sum(map(len, batches[:i])) for i in range(4)]
    log = write(tmp_path, segment_name(0, ".log"), b"".join(batches))
    return log, positions


def test_offset_index_lists_offset_and_position_per_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, pos[1]), OffsetPosition(9, pos[3])])
    result = run_dump("--files", index)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"Dumping {index}",
        f"offset: 2 position: {pos[1]}",
        f"offset: 9 position: {pos[3]}",
    ]


def test_verify_index_only_reports_entries_whose_batch_ends_elsewhere(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    # Entry offsets must be the batch's last offset: 1 and 4 are first offsets of their batches.
    offset_index.write_offset_index(
        index, 0, [OffsetPosition(1, pos[1]), OffsetPosition(3, pos[2]), OffsetPosition(4, pos[3])]
    )
    result = run_dump("--files", index, "--verify-index-only")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {index}"]
    assert result.stderr.splitlines() == [
        f"Mismatches in :{index}",
        "  Index offset: 4, log offset: 9",  # Kafka lists them from the highest index offset down
        "  Index offset: 1, log offset: 2",
    ]


def test_index_stops_at_a_zero_entry_after_the_first(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = write(tmp_path, segment_name(0, ".index"), struct.pack(">ii", 2, pos[1]) + bytes(16))
    assert run_dump("--files", index).stdout.splitlines() == [
        f"Dumping {index}",
        f"offset: 2 position: {pos[1]}",
    ]


def test_index_sanity_check_prints_kafkas_verdicts(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index, times = log.with_suffix(".index"), log.with_suffix(".timeindex")
    index.write_bytes(b"")
    times.write_bytes(b"")
    result = run_dump("--files", f"{index},{times}", "--index-sanity-check")
    assert result.stdout.splitlines() == [
        f"Dumping {index}",
        f"{index} is empty.",
        f"Dumping {times}",
        f"{times} passed sanity check.",
    ]
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, pos[1])])
    assert (
        run_dump("--files", index, "--index-sanity-check").stdout.splitlines()[1]
        == f"{index} passed sanity check."
    )


def test_index_failing_the_sanity_check_is_an_error(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = write(tmp_path, segment_name(0, ".index"), struct.pack(">ii", 2, pos[1]) + b"\x00\x00\x00")
    result = run_dump("--files", index, "--index-sanity-check")
    assert result.exit_code == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {index} at position 8: ") and "11 bytes" in error


def test_index_entry_pointing_past_the_log_is_an_error_naming_the_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    offset_index.write_offset_index(
        index, 0, [OffsetPosition(2, pos[1]), OffsetPosition(9, log.stat().st_size + 8)]
    )
    result = run_dump("--files", index)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Dumping {index}", f"offset: 2 position: {pos[1]}"]
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {index} at position 8: entry 1 (offset 9)")


def test_time_index_lists_timestamp_and_offset_per_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    offset_index.write_offset_index(log.with_suffix(".index"), 0, [OffsetPosition(2, pos[1])])
    times = log.with_suffix(".timeindex")
    time_index.write_time_index(times, 0, [TimestampOffset(TS + 1005, 2), TimestampOffset(TS + 1010, 9)])
    result = run_dump("--files", times)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"Dumping {times}",
        f"timestamp: {TS + 1005} offset: 2",
        f"timestamp: {TS + 1010} offset: 9",
    ]


def test_verify_index_only_reports_time_index_mismatches_in_kafkas_words(tmp_path, indexed_segment):
    log, pos = indexed_segment
    offset_index.write_offset_index(log.with_suffix(".index"), 0, [OffsetPosition(2, pos[1])])
    entries = (
        struct.pack(">qi", TS + 1004, 2) + struct.pack(">qi", TS + 1003, 3) + struct.pack(">qi", TS + 1020, 5)
    )
    times = write(tmp_path, segment_name(0, ".timeindex"), entries)
    result = run_dump("--files", times, "--verify-index-only")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {times}"]
    assert result.stderr.splitlines() == [
        f"Found timestamp mismatch in :{times}",
        f"  Index timestamp: {TS + 1004}, log timestamp: {TS + 1005}",
        f"Found out of order timestamp in :{times}",
        f"  Index timestamp: {TS + 1003}, Previously indexed timestamp: {TS + 1004}",
        f"The following indexed offsets are not found in :{times}",
        "Indexed offset: 5, found log offset: 9",
    ]


def test_reports_of_several_files_follow_javas_hash_map_order():
    # String.hashCode values anyone can check in Java: "Aa" and "BB" collide; one char hashes to itself.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("é") == 0xE9
    files: JavaHashMap[list] = JavaHashMap()
    for key in ["b", "BB", "a", "Aa"]:
        files.compute_if_absent(key, list)
    # 16 buckets, (h ^ h >>> 16) & 15: "Aa"/"BB" -> 0 (newest first), "a" = 97 -> 1, "b" = 98 -> 2.
    assert list(files.keys()) == ["Aa", "BB", "a", "b"]


def test_java_hash_map_order_changes_when_the_thirteenth_entry_makes_the_table_grow():
    files: JavaHashMap[list] = JavaHashMap()
    fillers = [chr(c) for c in range(ord("B"), ord("L") + 1)]  # 66..76: buckets 2..12 of 16 and of 32
    for key in ["a", "q", *fillers]:  # 97 and 113 share bucket 1 of 16
        files.compute_if_absent(key, list)
    assert list(files.keys()) == ["q", "a", *fillers]
    files.compute_if_absent("a", list)  # 13 > 3/4 of 16: the next call doubles the table first
    assert list(files.keys()) == ["a", *fillers, "q"]  # 113 & 31 = 17


def test_txn_index_lists_aborted_transactions(tmp_path):
    path = write(tmp_path, segment_name(150, ".txnindex"), E8 + E8[:20])  # a partial entry is ignored
    result = run_dump("--files", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"Dumping {path}",
        "version: 0 producerId: 1000 firstOffset: 150 lastOffset: 160 lastStableOffset: 161",
    ]


def test_txn_index_with_a_future_version_is_an_error_after_the_good_entries(tmp_path):
    later = txn_index.encode_txn_index([txn_index.AbortedTxn(1001, 170, 180, 181)])
    path = write(tmp_path, segment_name(150, ".txnindex"), E8 + b"\x01" + later[1:])
    result = run_dump("--files", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1:] == [
        "version: 0 producerId: 1000 firstOffset: 150 lastOffset: 160 lastStableOffset: 161"
    ]
    assert result.stderr.startswith(f"error: {path} at position 34: ")


def test_producer_snapshot_lists_each_producer(tmp_path):
    path = write(tmp_path, segment_name(205, ".snapshot"), E9_ONE)
    assert run_dump("--files", path).stdout.splitlines() == [
        f"Dumping {path}",
        f"producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {TS} firstSequence: 0 lastSequence: 4 lastOffset: 204 offsetDelta: 4 timestamp: {TS}",
    ]
    empty = write(tmp_path, segment_name(0, ".snapshot"), E9_EMPTY)
    assert run_dump("--files", empty).stdout.splitlines() == [f"Dumping {empty}"]


def test_producer_without_a_batch_has_no_sequence_fields_and_open_transaction_is_shown(tmp_path):
    entries = [
        ProducerSnapshotEntry(5, 3, 0, 1200, 2, TS, 7, 1100),
        ProducerSnapshotEntry(6, 0, -1, -1, 0, TS + 1, -1, -1),
    ]
    path = write(tmp_path, segment_name(1201, ".snapshot"), encode_producer_snapshot(entries))
    assert run_dump("--files", path).stdout.splitlines()[1:] == [
        f"producerId: 5 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[1100] "
        f"lastTimestamp: {TS} firstSequence: 2147483646 lastSequence: 0 lastOffset: 1200 offsetDelta: 2 timestamp: {TS}",
        f"producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {TS + 1}",
    ]


def test_corrupt_producer_snapshot_is_an_error(tmp_path):
    data = bytearray(E9_ONE)
    data[-1] ^= 0xFF
    path = write(tmp_path, segment_name(205, ".snapshot"), bytes(data))
    result = run_dump("--files", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Dumping {path}"]
    assert result.stderr.startswith(f"error: {path} at position 2: ")


# ---------------------------------------------------------------------------------------------- command line
def test_unknown_files_are_ignored_on_stderr_like_kafka(tmp_path):
    deleted = write(tmp_path, segment_name(0, ".log.deleted"), E1)
    epochs = write(tmp_path, "leader-epoch-checkpoint", b"0\n0\n")
    result = run_dump("--files", deleted, "--files", epochs)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {deleted}", f"Dumping {epochs}"]
    assert result.stderr.splitlines() == [
        f"Ignoring unknown file {deleted}",
        f"Ignoring unknown file {epochs}",
    ]


def test_files_may_be_repeated_and_comma_separated_and_keep_their_order(tmp_path):
    a = write(tmp_path, segment_name(0, ".log"), E1)
    b = write(tmp_path, segment_name(100, ".log"), E2)
    c = write(tmp_path, segment_name(200, ".log"), E4)
    result = run_dump("--files", f"{c},{a}", "--files", b)
    assert [line for line in result.stdout.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {c}",
        f"Dumping {a}",
        f"Dumping {b}",
    ]


def test_missing_file_is_a_usage_error_before_anything_is_dumped(tmp_path):
    good = write(tmp_path, segment_name(0, ".log"), E1)
    result = run_dump("--files", f"{good},{tmp_path / 'nope.log'}")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Invalid value for '--files'" in result.stderr and "nope.log" in result.stderr


@pytest.mark.parametrize(
    "args", [[], ["--files", "x.log", "--max-bytes", "-1"], ["--files", "x.log", "--bogus"]]
)
def test_bad_options_are_usage_errors(tmp_path, args):
    result = run_dump(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: ")


def test_index_without_its_log_is_an_error_naming_the_missing_file(tmp_path):
    index = tmp_path / segment_name(0, ".index")
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, 70)])
    result = run_dump("--files", index)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {index}: cannot check it: {tmp_path / segment_name(0, '.log')} does not exist"
    ]


def test_file_named_like_kafka_does_java_io_file(tmp_path):
    file = DumpedFile.of("a//b///00000000000000000000.log/", cwd="/work")
    assert (file.shown, file.name, file.absolute) == (
        "a/b/00000000000000000000.log",
        "00000000000000000000.log",
        "/work/a/b/00000000000000000000.log",
    )


# ---------------------------------------------------------------------------------------------- real Kafka
def _kafka_dump():
    harness = pytest.importorskip("tests.kafka_harness", reason="tests/kafka_harness.py is not there")
    if not hasattr(harness, "run_dump_log_segments"):
        pytest.skip("tests/kafka_harness.py has no run_dump_log_segments")
    return harness


_LOG4J_LINE = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR) .*\([\w.$]+\)$")


def _compare_with_kafka(harness, files: list[Path], args: list[str]) -> None:
    """Kafka's stdout must equal ours line for line. On stderr, ignore only Kafka's log4j lines and our
    "error:" lines (Kafka has none on these inputs; we add one for a partial last batch, Kafka exits 0)."""
    kafka = harness.run_dump_log_segments(files, *args)
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    ours = run_dump("--files", ",".join(map(str, files)), *args)
    assert ours.stdout.splitlines() == kafka.stdout.splitlines()
    kafka_err = [line for line in kafka.stderr.splitlines() if not _LOG4J_LINE.match(line)]
    assert [line for line in ours.stderr.splitlines() if not line.startswith("error: ")] == kafka_err


def build_zoo(root: Path) -> list[Path]:
    """Segment files of every kind, including the batches and index mistakes Kafka's tool reports on."""
    rng = random.Random(4)
    v2 = root / "zoo-0"
    batches = [
        record_batch.build_batch(
            100,
            [
                Record(100, TS, b"k", b"v"),
                Record(101, TS + 5, b"b", None, (Header("h", b"x"), Header("h2", None))),
            ],
            partition_leader_epoch=3,
            producer_id=7,
            producer_epoch=1,
            base_sequence=2**31 - 2,
        ),  # fmt: skip
    ]
    for codec in (1, 2, 3, 4):
        base = 100 + 2 * codec
        payloads = [bytes(rng.randrange(256) for _ in range(12)) for _ in range(2)]  # random, rarely UTF-8
        batches.append(
            record_batch.build_batch(
                base,
                [
                    Record(base, TS, None, "héllo".encode()),
                    Record(base + 1, TS + 1, payloads[0], payloads[1]),
                ],
                codec=codec,
            )  # fmt: skip
        )
    batches += [
        record_batch.build_control_batch(
            110, 1, producer_id=7, producer_epoch=1, coordinator_epoch=5, timestamp=TS
        ),
        record_batch.build_control_batch(
            111, 0, producer_id=8, producer_epoch=0, coordinator_epoch=-1, timestamp=TS
        ),
        (112).to_bytes(8, "big") + E5[8:],  # E5 moved to offset 112 (the base offset is outside the CRC)
        record_batch.build_batch(117, [Record(117, TS, b"a", b"1")], delete_horizon_ms=TS + 100),
        record_batch.build_batch(
            118, [Record(118, TS, b"a", b"1")], timestamp_type=record_batch.LOG_APPEND_TIME
        ),
        control_batch(119, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00"),
        control_batch(120, 9, b"zz"),
    ]
    bad_crc = bytearray(record_batch.build_batch(121, [Record(121, TS, b"k", b"value")]))
    bad_crc[-3] ^= 1
    batches.append(bytes(bad_crc))
    data = b"".join(batches)
    log = write(v2, segment_name(100, ".log"), data + data[:25])  # plus a partial batch
    builder = IndexBuilder(100, index_interval_bytes=100)
    for batch in log_file.iter_batches(data):
        builder.append(batch.position, batch.last_offset, batch.max_timestamp)
    offsets, times = builder.finish()
    offset_index.write_offset_index(log.with_suffix(".index"), 100, list(offsets))
    time_index.write_time_index(log.with_suffix(".timeindex"), 100, list(times))

    legacy = root / "legacy-0"
    entries = [encode_message(0, 0, b"k", b"v"), encode_message(1, 1, None, b"v1", TS)]
    for magic in (0, 1):
        for codec in (1, 2, 3):
            kb = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
            for i in range(3):
                kb.append(i, timestamp=TS + i if magic else None, key=b"a" if i else None, value=b"x%d" % i)
            entry = bytearray(kb.build())
            entry[0:8] = (4 if magic else 2).to_bytes(8, "big")
            entries.append(bytes(entry))
    inner = [LegacyRecord(10, 1, 0, TS, 0, b"q", b"w"), LegacyRecord(11, 1, 0, TS + 3, 0, b"q", b"w")]
    entries.append(encode_wrapper(inner, 1, 1, wrapper_timestamp=TS + 50, log_append_time=True))
    write(legacy, segment_name(0, ".log"), b"".join(entries))

    files = [log, log.with_suffix(".index"), log.with_suffix(".timeindex"), legacy / segment_name(0, ".log")]
    # Several partitions with index mistakes, so that the end-of-run reports of several files are ordered.
    for n in range(14):  # 14: the reports' tables grow past 16 buckets
        part = root / f"wrong-{n}"
        segment = [
            record_batch.build_batch(0, [Record(0, TS + 10, b"k", b"v" * 60)]),
            record_batch.build_batch(1, [Record(1, TS + 30, b"k", b"v"), Record(2, TS + 20, b"k", b"v")]),
            record_batch.build_batch(3, [], last_offset_delta=1, max_timestamp=TS + 40),
        ]
        pos = [0, len(segment[0]), len(segment[0]) + len(segment[1])]
        wrong_log = write(part, segment_name(0, ".log"), b"".join(segment))
        index = wrong_log.with_suffix(".index")
        index.write_bytes(struct.pack(">iiii", 1, pos[1], 3, pos[2]))
        times = wrong_log.with_suffix(".timeindex")
        times.write_bytes(struct.pack(">qiqiqi", TS + 20, 2, TS + 40, 4, TS + 40, 3))
        files += [wrong_log, index, times]
    snapshot_entries = [
        ProducerSnapshotEntry(5, 3, 0, 1200, 2, TS, 7, 1100),
        ProducerSnapshotEntry(6, 0, -1, -1, 0, TS + 1, -1, -1),
    ]
    files.append(write(v2, segment_name(122, ".snapshot"), encode_producer_snapshot(snapshot_entries)))
    files.append(write(v2, segment_name(205, ".snapshot"), E9_ONE))
    files.append(write(v2, segment_name(150, ".txnindex"), E8 + E8[:10]))
    kraft = [
        control_batch(0, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00"),
        control_batch(1, 4, b"\x00\x00\x00"),
    ]
    files.append(
        write(root / "__cluster_metadata-0", "00000000000000000002-0000000001.checkpoint", b"".join(kraft))
    )
    files.append(write(v2, "leader-epoch-checkpoint", b"0\n1\n3 100\n"))
    files.append(write(v2, segment_name(0, ".log.deleted"), E1))
    return files


@pytest.mark.broker
@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--deep-iteration"],
        ["--print-data-log"],
        ["--print-data-log", "--skip-record-metadata"],
        ["--verify-index-only"],
        ["--index-sanity-check"],
        ["--max-bytes", "700"],
    ],
    ids=lambda args: " ".join(args) or "shallow",
)
def test_matches_kafkas_dump_log_segments_on_built_files(kafka_jars, tmp_path, args):
    harness = _kafka_dump()
    _compare_with_kafka(harness, build_zoo(tmp_path), args)


@pytest.mark.broker
def test_matches_kafkas_dump_log_segments_on_a_partition_written_by_a_broker(kafka_broker):
    harness = _kafka_dump()
    broker = kafka_broker()
    topic = "dump"
    harness.create_topic(broker.bootstrap, topic, 1, harness.SMALL_SEGMENT_CONFIG)
    rng = random.Random(11)

    def records(tag: str, n: int) -> list:
        return [
            harness.SentRecord(
                None if i % 5 == 4 else f"{tag}-{i % 7}".encode(),
                None if i % 6 == 5 else rng.randbytes(rng.randint(5, 60)),
                (("h", b"1"), ("n", None)) if i % 3 == 0 else (),
                TS + i,
                partition=0,
            )
            for i in range(n)
        ]

    for codec in harness.COMPRESSION_CODECS:
        harness.produce(broker.bootstrap, topic, records(codec, 40), compression=codec)
    harness.produce(broker.bootstrap, topic, records("idem", 30), compression="lz4", idempotent=True)
    harness.produce_transactions(
        broker.bootstrap,
        topic,
        [
            harness.Transaction(records("c", 20), commit=True),
            harness.Transaction(records("a", 20), commit=False),
        ],
        transactional_id="dump-txn",
        compression="zstd",
    )
    assert broker.stop() in harness.CLEAN_EXIT_CODES
    partition = broker.log_dir / f"{topic}-0"
    suffixes = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
    files = sorted(p for p in partition.iterdir() if p.suffix in suffixes)
    assert {p.suffix for p in files} >= {".log", ".index", ".timeindex", ".snapshot", ".txnindex"}, files
    for args in (["--print-data-log"], ["--verify-index-only"], ["--index-sanity-check"]):
        _compare_with_kafka(harness, files, args)
