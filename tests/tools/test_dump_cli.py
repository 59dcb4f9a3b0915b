"""`kafka-log-jobs dump`'s command line as kafka-dump-log's: file lists, unknown and missing files, bad
options (how the expected lines are made: ``test_dump``).
"""

from __future__ import annotations

import pytest

from kafka_log_core.format import offset_index
from kafka_log_core.format.offset_index import OffsetPosition
from kafka_log_core.tools.dump import DumpedFile
from tests.tools.dump_harness import (
    E1,
    E2,
    E4,
    run_dump,
    segment_name,
    write,
)


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


# ---------------------------------------------------------------------------------------------- decoder classes
def _numbers_segment(tmp_path, key: bytes | None, value: bytes | None):
    from kafka_log_core.format import record_batch
    from kafka_log_core.format.record_batch import Record

    batch = record_batch.build_batch(0, [Record(0, 1, key, value)])
    return write(tmp_path, segment_name(0, ".log"), batch)


def test_a_decoder_class_kafka_does_not_ship_is_a_usage_error(tmp_path):
    log = write(tmp_path, segment_name(0, ".log"), E1)
    result = run_dump("--files", log, "--value-decoder-class", "com.example.AvroDecoder")
    assert result.exit_code == 2
    assert "'com.example.AvroDecoder' is not one Kafka ships" in result.stderr
    assert "Dumping" not in result.stdout


@pytest.mark.parametrize(
    ("decoder", "data", "shown"),
    [
        ("IntegerDecoder", (-2).to_bytes(4, "big", signed=True) + b"rest", "-2"),
        ("LongDecoder", (2**40).to_bytes(8, "big"), str(2**40)),
        ("StringDecoder", "héllo".encode(), "héllo"),
        ("DefaultDecoder", b"\x00\x01", "[B@"),
    ],
)
def test_the_decoder_classes_read_keys_and_values_as_kafkas_do(tmp_path, decoder, data, shown):
    log = _numbers_segment(tmp_path, data, data)
    name = f"org.apache.kafka.tools.api.{decoder}"
    result = run_dump("--files", log, "--key-decoder-class", name, "--value-decoder-class", name)
    assert result.exit_code == 0
    record = result.stdout.splitlines()[-1]
    assert f" key: {shown}" in record and f" payload: {shown}" in record


def test_a_number_decoder_on_too_few_bytes_names_the_file_and_batch(tmp_path):
    """Kafka's tool dies with a BufferUnderflowException; ours says which record and goes on (exit 1)."""
    log = _numbers_segment(tmp_path, b"\x01\x02", b"v")
    result = run_dump("--files", log, "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {log} at position 0: record at offset 0: IntegerDecoder cannot read a number from its "
        "2-byte key"
    ]


# ---------------------------------------------------------------------------------------------- cluster metadata
def test_cluster_metadata_records_print_as_json_payloads_without_keys(tmp_path):
    from tests.metadata_build import config_record, metadata_batch, topic_record

    topic_id = "Q1T14e0ESROO3ruypoOXLg"
    batch = metadata_batch(
        0, [topic_record("orders", topic_id), config_record(2, "orders", "x", None), b"\x00"]
    )
    log = write(tmp_path / "__cluster_metadata-0", segment_name(0, ".log"), batch)
    result = run_dump("--files", log, "--cluster-metadata-decoder", "--skip-record-metadata")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[3:] == [
        '| payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"'
        + topic_id
        + '"}}',
        '| payload: {"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"orders",'
        '"name":"x","value":null}}',
        "| payload: Error at 2, skipping. Could not deserialize metadata record with frame version 0. Note that "
        "upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.",
    ]


# ---------------------------------------------------------------------------------------------- remote log metadata
def test_remote_log_metadata_records_print_as_kafkas_objects_print_themselves(tmp_path):
    import struct

    from tests.metadata_build import frame, metadata_batch, string, tagged, uvarint

    topic_id, segment_id = bytes(range(16)), bytes(range(16, 32))
    tip = string("orders") + topic_id + struct.pack(">i", 3) + tagged()
    body = tip + segment_id + tagged() + struct.pack(">qqiqq", 0, 99, 7, 5, 9)
    body += uvarint(3) + struct.pack(">iq", 4, 60) + tagged() + struct.pack(">iq", 1, 0) + tagged()
    body += struct.pack(">i", 4096) + uvarint(4) + b"abc" + b"\x01" + tagged((0, b"\x01"))
    deleted = frame(2, 0, tip + struct.pack(">iqb", 2, 11, 7) + tagged())
    log = write(tmp_path, segment_name(0, ".log"), metadata_batch(0, [frame(0, 0, body), deleted]))
    result = run_dump("--files", log, "--remote-log-metadata-decoder", "--skip-record-metadata")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[3:] == [
        "| payload: RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition="
        "AAECAwQFBgcICQoLDA0ODw:orders-3, id=EBESExQVFhcYGRobHB0eHw}, startOffset=0, endOffset=99, brokerId=7, "
        "maxTimestampMs=5, eventTimestampMs=9, segmentLeaderEpochs={1=0, 4=60}, segmentSizeInBytes=4096, "
        "customMetadata=Optional[CustomMetadata{3 bytes}], state=COPY_SEGMENT_FINISHED, txnIdxEmpty=true}",
        "| payload: Error at offset 1, skipping. null",  # state 7: Objects.requireNonNull(null)
    ]


def test_a_decoder_option_wins_over_the_decoder_classes_which_are_then_not_looked_at(tmp_path):
    log = write(tmp_path / "__cluster_metadata-0", segment_name(0, ".log"), E1)
    result = run_dump("--files", log, "--cluster-metadata-decoder", "--key-decoder-class", "com.example.Nope")
    assert result.exit_code == 0
    assert "payload: Error at 0, skipping." in result.stdout
