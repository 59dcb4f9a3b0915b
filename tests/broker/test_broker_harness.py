"""The real-broker harness does what the differential tests will rely on.

Every expectation is computed from the records the test sent, never from what the consumer returned.
"""

from __future__ import annotations

import random
import re
import socket
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.kafka_harness import (
    CLEAN_EXIT_CODES,
    COMPRESSION_CODECS,
    SMALL_SEGMENT_CONFIG,
    BrokerHarnessError,
    ConsumedRecord,
    KafkaBroker,
    SentRecord,
    Transaction,
    consume_all,
    create_topic,
    earliest_offsets,
    latest_offsets,
    produce,
    produce_transactions,
    run_dump_log_segments,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

PARTITIONS = 3


def _records(rng: random.Random, tag: str, count: int, first_ts: int) -> list[SentRecord]:
    """Keyed and null-keyed records, tombstones, headers (repeated names, null values), explicit timestamps."""
    out = []
    for i in range(count):
        key = None if i % 5 == 4 else f"key-{i % 7}".encode()
        value = None if i % 6 == 5 else rng.randbytes(rng.randint(40, 120))
        if i % 3 == 0:
            headers: tuple = (("tag", tag.encode()), ("i", str(i).encode()), ("tag", b"again"))
        elif i % 3 == 1:
            headers = (("null-value", None),)
        else:
            headers = ()
        out.append(SentRecord(key, value, headers, first_ts + i, partition=i % PARTITIONS))
    return out


def _by_partition(records: list[SentRecord]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = defaultdict(list)
    for r in records:
        out[r.partition].append((r.key, r.value, r.headers, r.timestamp_ms, "CreateTime"))
    return dict(out)


def _consumed_by_partition(records: list[ConsumedRecord]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = defaultdict(list)
    for r in records:
        out[r.partition].append((r.key, r.value, r.headers, r.timestamp, r.timestamp_type))
    return dict(out)


def test_round_trip_clean_shutdown_dump_and_restart(kafka_broker):
    broker = kafka_broker()
    bootstrap, topic = broker.bootstrap, "harness"
    create_topic(bootstrap, topic, PARTITIONS, SMALL_SEGMENT_CONFIG)

    # Kafka 4.x refuses segment.bytes below 1 MiB; the message comes from the broker.
    with pytest.raises(BrokerHarnessError, match="1048576"):
        create_topic(bootstrap, "too-small", 1, {"segment.bytes": 1024})

    rng = random.Random(20240611)
    ts = int(time.time() * 1000) - 600_000
    committed: list[SentRecord] = []  # in send order
    for codec in COMPRESSION_CODECS:
        batch = _records(rng, codec, 45, ts + len(committed))
        produce(bootstrap, topic, batch, compression=codec)
        committed += batch
    batch = _records(rng, "idempotent", 45, ts + len(committed))
    produce(bootstrap, topic, batch, compression="lz4", idempotent=True)
    committed += batch
    txn_commit = _records(rng, "txn-commit", 30, ts + 10_000)
    txn_abort = _records(rng, "txn-abort", 30, ts + 20_000)
    produce_transactions(
        bootstrap,
        topic,
        [Transaction(txn_commit, commit=True), Transaction(txn_abort, commit=False)],
        transactional_id="harness-txn",
        compression="zstd",
    )
    everything = committed + txn_commit + txn_abort
    committed += txn_commit

    # Both transactions touch every partition, so each partition holds two control batches (markers).
    sent_per_partition = {p: sum(r.partition == p for r in everything) for p in range(PARTITIONS)}
    expected_end = {p: n + 2 for p, n in sent_per_partition.items()}
    assert latest_offsets(bootstrap, topic) == expected_end
    assert latest_offsets(bootstrap, topic, isolation_level="read_committed") == expected_end
    assert earliest_offsets(bootstrap, topic) == dict.fromkeys(range(PARTITIONS), 0)

    uncommitted = consume_all(bootstrap, topic)
    read_committed = consume_all(bootstrap, topic, isolation_level="read_committed")
    assert _consumed_by_partition(uncommitted) == _by_partition(everything)
    assert _consumed_by_partition(read_committed) == _by_partition(committed)
    assert len(read_committed) == len(everything) - len(txn_abort)

    assert broker.stop() in CLEAN_EXIT_CODES
    log_dir = broker.log_dir
    assert (log_dir / ".kafka_cleanshutdown").is_file()
    partition_dir = log_dir / f"{topic}-0"
    segments = segment_files(partition_dir)
    assert len(segments) >= 3, [p.name for p in segments]

    dump = run_dump_log_segments(segments, "--deep-iteration")
    assert dump.returncode == 0, dump.stderr
    batches = re.findall(r"^baseOffset: (\d+) lastOffset: (\d+) .*isControl: (true|false)", dump.stdout, re.M)
    assert batches, dump.stdout[:2000]
    assert max(int(last) for _, last, _ in batches) == expected_end[0] - 1
    assert sum(control == "true" for *_, control in batches) == 2
    # Two producers had producer ids: the idempotent one and the transactional one.
    assert len(set(re.findall(r"producerId: (\d+)", dump.stdout))) == 2
    # Deep iteration lists every offset of the partition once: data records and the two markers.
    assert len(re.findall(r"^\| offset: \d+", dump.stdout, re.M)) == expected_end[0]

    broker.restart()
    assert not (log_dir / ".kafka_cleanshutdown").exists()  # the broker consumed it while loading
    assert consume_all(broker.bootstrap, topic) == uncommitted
    assert consume_all(broker.bootstrap, topic, isolation_level="read_committed") == read_committed


def test_broker_log_cleaner_compacts_and_checkpoints(kafka_broker):
    broker = kafka_broker(server_props={"log.cleaner.backoff.ms": 100})
    bootstrap, topic = broker.bootstrap, "compacted"
    config = {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": 0.01,
        "segment.ms": 100,
        **SMALL_SEGMENT_CONFIG,
    }
    create_topic(bootstrap, topic, 1, config)

    rng = random.Random(7)
    ts = int(time.time() * 1000) - 600_000
    records = [
        SentRecord(f"k{i % 11}".encode(), None if i % 13 == 12 else rng.randbytes(60), (), ts + i, 0)
        for i in range(300)
    ]
    delivered = produce(bootstrap, topic, records, compression="gzip")
    assert [d.offset for d in delivered] == list(range(len(records)))

    # The active segment is never cleaned; once production stops it no longer changes.
    active_base = int(segment_files(broker.log_dir / f"{topic}-0")[-1].name[:20])
    assert active_base > 0
    cleaned_to = wait_for_broker_cleaning(broker.log_dir, topic, 0, active_base, timeout=60)
    assert cleaned_to == active_base

    # Below the cleaned offset only the last record of each key survives (tombstones included: they are
    # kept for delete.retention.ms); the active segment is untouched.
    last_index = {r.key: i for i, r in enumerate(records[:cleaned_to])}
    expected = [
        (i, r.key, r.value) for i, r in enumerate(records) if i >= cleaned_to or last_index[r.key] == i
    ]
    assert len(expected) < len(records)
    consumed = consume_all(bootstrap, topic)
    assert [(r.offset, r.key, r.value) for r in consumed] == expected


def test_start_failure_reports_the_broker_log(kafka_jars: Path, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = KafkaBroker(tmp_path / "log-dir", tmp_path, lib_dir=kafka_jars, port=taken.getsockname()[1])
        with pytest.raises(BrokerHarnessError, match="exited with code") as failure:
            broker.start(timeout=60)
    assert "Address already in use" in str(failure.value)
    assert not broker.running
