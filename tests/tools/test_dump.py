"""`kafka-log-jobs dump` prints what Kafka 4.x's kafka-dump-log prints: ``.log`` files.

Expected lines are written out here by hand in Kafka's format (field names, order and wording read from
DumpLogSegments): numbers come from the spec's hex examples (§14, copied by hand), from the bytes a test
wrote, or from zlib/crc32c over them, never from the dump code. The indexes, snapshots and checkpoints:
``test_dump_indexes``; the command line: ``test_dump_cli``; Kafka's own DumpLogSegments run on the same
files and compared line by line: ``tests/broker/test_broker_dump.py``.
"""

from __future__ import annotations

import re
import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import log_file, record_batch
from kafka_log_core.format.record_batch import Record
from kafka_log_core.tools.dump import LogReader, _utf8
from tests.tools.dump_harness import (
    E1,
    E2,
    E3,
    E4,
    E5,
    E6_V0,
    E6_V1,
    TS,
    compact_string,
    control_batch,
    legacy_crc,
    run_dump,
    segment_name,
    stored_crc,
    v2_line,
    write,
)


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
