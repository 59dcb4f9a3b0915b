"""The compiled passes over whole segments (``map_pass``, ``clean_pass``, ``chunk_walk``) and every place they hand a batch back
to Python: compressed batches, control batches, aborted and open transactions, corrupt data mid-segment,
a map that fills inside a batch, a full output buffer; CRC32C against the crc32c package; the header
scan against the readable reader; producer-state replay against the per-batch readable replay.

Expected survivors are worked out from the spec's rules in each test (for the larger logs, by a
last-offset-per-key model written here); every cleaned directory is re-read with kafka-python and its
indexes recomputed (``check_dir`` of ``cleaner_harness``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import crc32c
import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format import compression, log_file, record_batch
from kafka_log_core.kernels import clean_pass, decoded_areas, fields, header_scan, map_pass, statuses
from kafka_log_core.kernels import crc32c as crc32c_kernels
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.rules import cleaner, cleaner_segments, producer_state
from kafka_log_core.settings.config import BrokerConfig
from tests.format.test_decompression_limits import CODECS, IDS, LIMIT, raw_batch, record_area, with_library
from tests.logbuild import TS, batch, marker
from tests.rules.cleaner_harness import (
    BROKER,
    COMPACT,
    FORGET_PRODUCERS,
    KEEP_PRODUCERS,
    NOW,
    batches,
    clean,
    data_records,
    layout,
    marker_offsets,
    open_log,
    part,
    single,
    tiny_map,
    txn,
    txnindex,
    write_txnindex,
)

MiB = 1024 * 1024


# ============================================================================================ CRC32C
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=600), start=st.integers(0, 40))
def test_crc32c_kernels_agree_with_the_crc32c_package(data, start):
    arr = fields.as_bytes(data)
    start = min(start, len(data))
    want = crc32c.crc32c(data[start:])
    assert crc32c_kernels.crc32c_table(arr, start, len(data) - start) == want
    if crc32c_kernels.HARDWARE_CRC32C:
        assert crc32c_kernels.crc32c_sse42(arr, start, len(data) - start) == want


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    block=st.sampled_from(crc32c_kernels.CRC_BLOCKS),
    blocks=st.integers(0, 7),
    extra=st.integers(-9, 9),
    start=st.integers(0, 15),
)
def test_crc32c_of_lengths_at_the_interleaved_block_edges_equals_the_crc32c_package(
    seed, block, blocks, extra, start
):
    # the hardware kernel runs three registers over three blocks of each CRC_BLOCKS length and joins them
    n = max(0, block * blocks + extra)
    data = random.Random(seed).randbytes(start + n)
    want = crc32c.crc32c(data[start:])
    assert crc32c_kernels.crc32c_table(fields.as_bytes(data), start, n) == want
    if crc32c_kernels.HARDWARE_CRC32C:
        assert crc32c_kernels.crc32c_sse42(fields.as_bytes(data), start, n) == want


def test_crc32c_known_vectors():
    # Format spec §1: CRC32C("123456789") = E3069283; Kafka's own test value CRC32C("Some String").
    for data, want in ((b"123456789", 0xE3069283), (b"Some String", 608512271), (b"", 0)):
        assert crc32c_kernels.crc32c(fields.as_bytes(data), 0, len(data)) == want


# ============================================================================================ header scan
def test_header_scan_matches_the_readable_reader(tmp_path):
    data = b"".join([
        batch(0, [("a", "1"), ("b", None)]),
        batch(2, [("c", "1")], codec=compression.ZSTD, pid=7, epoch=3, seq=11, txn=True),
        marker(3, True, 7, epoch=3),
        record_batch.build_batch(4, [], last_offset_delta=2, max_timestamp=TS + 9, producer_id=7, producer_epoch=3,
                                 is_control=True, is_transactional=True),
        batch(7, [("d", "1")])[:-3],  # a partial batch at the end is invisible to readers
    ])  # fmt: skip
    status, _, rows2d = header_scan.scan_headers(fields.as_bytes(data), 0, len(data))
    rows = header_scan.header_rows(rows2d)
    assert status == statuses.DONE
    readable = list(log_file.iter_batches(data))
    assert len(rows) == len(readable) == 4
    for row, b in zip(rows, readable, strict=True):
        h = b.header
        assert (row["position"], row["size"], row["base_offset"], row["last_offset"]) == (
            b.position, b.size_in_bytes, h.base_offset, h.last_offset
        )  # fmt: skip
        assert (row["max_timestamp"], row["producer_id"], row["producer_epoch"], row["records_count"]) == (
            h.max_timestamp, h.producer_id, h.producer_epoch, h.records_count
        )  # fmt: skip
        assert (row["attributes"], row["base_sequence"]) == (h.attributes, h.base_sequence)
    assert rows["control_type"].tolist() == [header_scan.NOT_CONTROL, header_scan.NOT_CONTROL, record_batch.CONTROL_COMMIT,
                                             header_scan.EMPTY_CONTROL]  # fmt: skip
    assert rows["coordinator_epoch"][2] == 0  # the marker's value: version 0, coordinator epoch 0


def test_header_scan_refuses_what_the_readable_reader_refuses(tmp_path):
    good = batch(0, [("a", "1")])
    bad = bytearray(batch(1, [("b", "1")]))
    bad[8:12] = (5).to_bytes(4, "big")  # a size below the 14-byte minimum
    directory = part(tmp_path)
    directory.mkdir(parents=True)
    (directory / f"{0:020d}.log").write_bytes(good + bytes(bad))
    segment = open_log(tmp_path).segments[0]
    with pytest.raises(
        CorruptDataError, match=rf"00000000000000000000\.log at position {len(good)}: record size 5"
    ):
        segment.headers()


# ============================================================================================ producer replay
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_producer_replay_equals_the_readable_replay(tmp_path_factory, seed):
    """Random headers of a few producers (epoch bumps, transactions, markers, empty batches, plain data),
    replayed by the compiled scan + numpy reduction and by the per-batch readable path."""
    rng = random.Random(seed)
    out, offset = [], 0
    epochs = {1: 0, 2: 0, 3: 5}
    for _ in range(rng.randint(1, 40)):
        pid = rng.choice([-1, 1, 2, 3])
        kind = rng.random()
        if pid >= 0 and rng.random() < 0.15:
            epochs[pid] += 1
        epoch = epochs.get(pid, -1)
        if pid >= 0 and kind < 0.25:
            out.append(marker(offset, rng.random() < 0.5, pid, epoch=epoch, ts=TS + offset))
            offset += 1
        elif pid >= 0 and kind < 0.3:
            out.append(record_batch.build_batch(offset, [], producer_id=pid, producer_epoch=epoch, base_sequence=offset,
                                                last_offset_delta=1, max_timestamp=TS + offset,
                                                is_transactional=rng.random() < 0.5))  # fmt: skip
            offset += 2
        else:
            n = rng.randint(1, 3)
            out.append(batch(offset, [(f"k{offset + i}", "v") for i in range(n)], ts=TS + offset, pid=pid,
                             epoch=epoch, seq=offset if pid >= 0 else -1, txn=pid >= 0 and rng.random() < 0.5))  # fmt: skip
            offset += n
    directory = tmp_path_factory.mktemp("replay")
    layout(directory, {0: out, offset: []})
    segment = open_log(directory).segments[0]
    compiled: dict[int, producer_state.ProducerEntry] = {}
    producer_state.replay_headers(compiled, segment.headers())
    readable: dict[int, producer_state.ProducerEntry] = {}
    producer_state.replay(readable, segment.batches())
    assert compiled == readable


def test_a_producer_control_batch_that_is_not_a_marker_is_refused_by_both_replays(tmp_path):
    # Kafka's EndTransactionMarker accepts only ABORT (0) and COMMIT (1) in a producer's control batch: any
    # other type (2, LEADER_CHANGE) fails the broker's producer-state replay, so ours names file and position.
    data = batch(0, [("k", "v")], pid=7, epoch=0, seq=0, txn=True)
    odd = record_batch.build_control_batch(1, 2, producer_id=7, producer_epoch=0, timestamp=TS)
    layout(tmp_path, {0: [data, odd], 2: []})
    segment = open_log(tmp_path).segments[0]
    where = str(segment.log_path)
    message = rf"{re.escape(where)} at position {len(data)}: control batch at offset 1 of producer 7 holds"
    with pytest.raises(CorruptDataError, match=message):
        producer_state.replay_headers({}, segment.headers(), where)
    with pytest.raises(CorruptDataError, match=message):
        producer_state.replay({}, segment.batches(), where)


# ============================================================================================ return to Python
def test_compressed_batches_among_plain_ones_are_decided_like_any_batch(tmp_path):
    # Keys superseded across codecs; the zstd batch loses one of its two records (rebuilt, recompressed),
    # the lz4 batch loses its only one (dropped), the gzip one is kept whole (copied unchanged).
    lz4_only = batch(1, [("b", "1")], codec=compression.LZ4)
    gzip_whole = batch(4, [("d", "1"), ("e", "1")], codec=compression.GZIP)
    layout(tmp_path, {0: [
        single(0, "a", "1"), lz4_only, batch(2, [("a", "2"), ("c", "1")], codec=compression.ZSTD),
        gzip_whole, single(6, "b", "2"), single(7, "c", "2"),
    ], 8: [single(8, "z")]})  # fmt: skip
    clean(tmp_path)
    assert data_records(tmp_path) == [
        (2, b"a", b"2"), (4, b"d", b"1"), (5, b"e", b"1"), (6, b"b", b"2"), (7, b"c", b"2"), (8, b"z", b"v")
    ]  # fmt: skip
    seen = batches(tmp_path)
    assert [b.codec for b in seen] == [compression.ZSTD, compression.GZIP, 0, 0, 0]
    assert (seen[0].base_offset, seen[0].last_offset, seen[0].offsets) == (2, 3, [2])
    assert seen[1].raw == gzip_whole


def test_an_aborted_compressed_batch_that_does_not_decompress_is_dropped_unread(tmp_path):
    # The cleaner never decompresses aborted data, so a broken codec stream there is no error.
    broken = bytearray(txn(1, [1, 2], pid=5, codec=compression.LZ4))
    broken[record_batch.HEADER_SIZE + 10] ^= 0xFF
    broken[17:21] = crc32c.crc32c(bytes(broken[21:])).to_bytes(4, "big")  # the CRC still holds
    layout(tmp_path, {0: [single(0, "a"), bytes(broken), marker(3, False, 5), single(4, "b")], 5: []})
    write_txnindex(part(tmp_path), 0, [(5, 1, 3, 0)])
    clean(tmp_path, broker=FORGET_PRODUCERS)  # an active producer's last batch is read to keep it empty
    assert data_records(tmp_path) == [(0, b"a", b"v"), (4, b"b", b"v")]


def test_a_compressed_batch_that_does_not_decompress_is_reported_with_its_file_and_position(tmp_path):
    broken = bytearray(batch(1, [("b", "1"), ("c", "1")], codec=compression.ZSTD))
    broken[record_batch.HEADER_SIZE + 4 :] = b"\x00" * (len(broken) - record_batch.HEADER_SIZE - 4)
    broken[17:21] = crc32c.crc32c(bytes(broken[21:])).to_bytes(4, "big")
    first = single(0, "a")
    layout(tmp_path, {0: [first, bytes(broken)], 3: []})
    before = {p.name: p.read_bytes() for p in part(tmp_path).iterdir()}
    # the batch's own position: it decompresses to nothing, where its two records need 14 bytes at least
    with pytest.raises(
        CorruptDataError, match=rf"00000000000000000000\.log at position {len(first)}: .*2 records"
    ):
        clean(tmp_path)
    assert {p.name: p.read_bytes() for p in part(tmp_path).iterdir()} == before


# ============================================================================================ bounds
def _clean_within(log_dir, max_batch_bytes: int) -> cleaner.CleanResult:
    log = open_log(log_dir)
    the_plan = cleaner.plan_cleaning(log, COMPACT, BROKER, NOW)
    return cleaner.clean_log(log, the_plan, COMPACT, BROKER, NOW, max_batch_bytes=max_batch_bytes)


def _files(log_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in part(log_dir).iterdir()}


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_compression_bomb_fails_the_round_at_its_batch_and_changes_nothing(tmp_path, codec):
    first = single(0, "a")
    bomb = raw_batch(
        1, 1, with_library(codec, bytes(64 * LIMIT)), codec
    )  # one record claimed, 64 MiB of zeros
    layout(tmp_path, {0: [first, bomb, single(2, "b")], 3: []})
    before = _files(tmp_path)
    with pytest.raises(
        CorruptDataError, match=rf"0000\.log at position {len(first)}: .*more than {LIMIT} bytes"
    ):
        _clean_within(tmp_path, LIMIT)
    assert _files(tmp_path) == before


def test_a_record_count_the_batch_cannot_hold_fails_the_round_at_its_batch(tmp_path):
    first = single(0, "a")
    lie = raw_batch(1, 2**20, record_area([b"v"]))  # one real record claimed to be 2^20
    # the batch after it comes after its offsets 1..2^20: the count is the only lie
    layout(tmp_path, {0: [first, lie, single(2**20 + 1, "b")], 2**20 + 2: []})
    before = _files(tmp_path)
    with pytest.raises(
        CorruptDataError, match=rf"0000\.log at position {len(first)}: .*claims 1048576 records"
    ):
        clean(tmp_path)
    assert _files(tmp_path) == before


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_a_batch_as_large_as_the_limit_is_cleaned_and_one_byte_less_refuses_it(tmp_path, codec):
    area = record_area([bytes(LIMIT - 100)])  # key "k", superseded by the next batch's
    layout(tmp_path, {0: [raw_batch(0, 1, with_library(codec, area), codec), single(1, "k", "new")], 2: []})
    before = _files(tmp_path)
    with pytest.raises(CorruptDataError, match=r"0000\.log at position 0: .*more than"):
        _clean_within(tmp_path, len(area) - 1)
    assert _files(tmp_path) == before
    _clean_within(tmp_path, len(area))
    assert data_records(tmp_path) == [(1, b"k", b"new")]


# ============================================================================================ batch offsets
def _crc_broken(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])  # the last byte of its value: the CRC no longer matches


_A, _B, _C, _D = (single(0, "a"), single(1, "b"), single(5, "c"), single(2, "d"))
_BACKWARDS = "backwards or overlapping"


@pytest.mark.parametrize(
    "segments,first_dirty,where,problem",
    [
        ({0: [_A, _B, _C, _D], 6: []}, None, ("0000", 3 * len(_A)), _BACKWARDS),  # pass 1
        ({0: [_A, _B, _C, _D], 6: [single(6, "a"), single(7, "a")], 8: []}, 6, ("0000", 3 * len(_A)), _BACKWARDS),
        ({0: [_A, _B, single(2, "c")], 2: [single(2, "a"), single(3, "a")], 4: []}, 2, ("0002", 0), "ends at offset 2"),
        ({0: [_A, _B, single(2, "c")], 2: [single(2, "a"), single(3, "a")], 4: []}, None, ("0002", 0), "ends at offset 2"),
        ({0: [_A, _B, single(2, "c")], 2: [single(2, "a")]}, None, ("0002", 0), "ends at offset 2"),
        ({0: [_A, _crc_broken(_B), _C, _D], 6: []}, None, ("0000", 3 * len(_A)), _BACKWARDS),
    ],
    ids=[
        "in a dirty segment", "in a clean segment", "between the clean and the dirty section",
        "between two dirty segments", "at the first batch after the round", "before a CRC error earlier on",
    ],
)  # fmt: skip
def test_offsets_a_broker_never_appends_fail_the_round_at_their_batch_and_change_nothing(
    tmp_path, segments, first_dirty, where, problem
):
    """The walks of the round (pass 1 over the dirty section, the CRC check of the clean one) check every
    batch's offsets on the way; the boundaries between segments are checked from what they saw. The error
    is the one the check of its own gives, and it is named before any other problem of the round."""
    layout(tmp_path, segments)
    before = _files(tmp_path)
    name, position = where
    with pytest.raises(CorruptDataError, match=rf"{name}\.log at position {position}: .*{problem}"):
        clean(tmp_path, first_dirty=first_dirty)
    assert _files(tmp_path) == before


def test_runs_of_compressed_batches_end_at_their_byte_budget_and_the_next_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(cleaner_segments.Run, "RUN_BYTES", 1)  # every run: one batch
    zstd = [batch(5 * b, [(f"k{i}", f"{b}") for i in range(5)], codec=compression.ZSTD) for b in range(20)]
    layout(tmp_path, {0: zstd, 100: []})
    clean(tmp_path)
    assert data_records(tmp_path) == [(95 + i, f"k{i}".encode(), b"19") for i in range(5)]


def test_markers_in_a_run_of_plain_batches(tmp_path):
    # Control batches are decided in the kernel: first pass, committed data kept with its marker.
    layout(tmp_path, {0: [single(0, "a"), txn(1, [1], pid=9), single(2, "a", "2"), marker(3, True, 9),
                          single(4, "b")], 5: []})  # fmt: skip
    clean(tmp_path, broker=KEEP_PRODUCERS)
    assert data_records(tmp_path) == [(1, b"1", b"1"), (2, b"a", b"2"), (4, b"b", b"v")]
    assert marker_offsets(tmp_path) == [3]


def test_exactly_once_workload_every_batch_transactional(tmp_path):
    # Every data batch transactional (committed, some aborted); keys 0-9 rewritten in 60 transactions.
    out, aborted, offset = [], [], 0
    for t in range(60):
        pid = 100 + t % 4
        keys = [(t * 3 + i) % 10 for i in range(3)]
        out.append(txn(offset, keys, pid=pid, seq=offset))
        abort = t % 7 == 3
        out.append(marker(offset + 3, not abort, pid))
        if abort:
            aborted.append((pid, offset, offset + 3, offset))
        offset += 4
    layout(tmp_path, {0: out, offset: [single(offset, "z")]})
    write_txnindex(part(tmp_path), 0, aborted)
    clean(tmp_path, broker=KEEP_PRODUCERS)
    # Model: the latest committed record per key survives.
    latest = {}
    for t in range(60):
        if t % 7 != 3:
            for i in range(3):
                latest[str((t * 3 + i) % 10)] = t * 4 + i
    want = sorted((o, k.encode(), k.encode()) for k, o in latest.items()) + [(offset, b"z", b"v")]
    assert data_records(tmp_path) == want
    assert len(marker_offsets(tmp_path)) == 60  # every marker stays on the first pass
    assert sorted(e[1] for e in txnindex(part(tmp_path)).get(0, [])) == sorted(a[1] for a in aborted)


def test_open_transaction_bounds_the_round_and_the_rest_is_cleaned(tmp_path):
    # The open transaction (no marker) at offset 3 bounds the LSO: segment 3 is not cleaned.
    layout(tmp_path, {0: [single(0, "a"), single(1, "a", "2"), single(2, "b")],
                      3: [txn(3, [1], pid=4), single(4, "a", "3")], 5: [single(5, "c")]})  # fmt: skip
    result = clean(tmp_path)
    assert result.end_offset == 3
    assert data_records(tmp_path) == [(1, b"a", b"2"), (2, b"b", b"v"), (3, b"1", b"1"), (4, b"a", b"3"),
                                      (5, b"c", b"v")]  # fmt: skip


@pytest.mark.parametrize("corrupt_at", [40, 600], ids=["first-chunk", "after-a-chunk"])
def test_corrupt_batch_mid_segment_names_the_file_and_position(tmp_path, corrupt_at):
    segment = [single(i, f"k{i % 7}") for i in range(700)]
    position = sum(len(b) for b in segment[:corrupt_at])
    bad = bytearray(segment[corrupt_at])
    bad[-1] ^= 0xFF  # a value byte: the CRC no longer holds
    segment[corrupt_at] = bytes(bad)
    layout(tmp_path, {0: segment, 700: []})
    before = {p.name: p.read_bytes() for p in part(tmp_path).iterdir()}
    with pytest.raises(
        CorruptDataError, match=rf"00000000000000000000\.log at position {position}: CRC32C mismatch"
    ):
        clean(tmp_path)
    assert {p.name: p.read_bytes() for p in part(tmp_path).iterdir()} == before


def test_corrupt_record_mid_segment_names_the_file_and_position(tmp_path):
    good = [single(i, f"k{i}") for i in range(5)]
    bad = bytearray(batch(5, [("x", "1")]))
    bad[61] = 0x7E  # record length varint: 63, far past the batch's end
    bad[17:21] = crc32c.crc32c(bytes(bad[21:])).to_bytes(4, "big")
    layout(tmp_path, {0: [*good, bytes(bad), single(6, "y")], 7: []})
    position = sum(len(b) for b in good)
    with pytest.raises(CorruptDataError, match=rf"00000000000000000000\.log at position {position + 61}"):
        clean(tmp_path)


@pytest.mark.parametrize("records_per_batch", [1, 7, 3000])
def test_map_full_inside_a_batch_and_across_chunks(tmp_path, records_per_batch):
    # 3000 records, keys k0..k399 repeating. A map of 3 keys fills at the 4th distinct key (offset 3),
    # inside a batch when batches hold several records: L = offset 2, checkpoint 3, nothing removed (each
    # of offsets 0-2 is its key's latest in the map). A default map then takes the rest in one round: the
    # last 400 records survive.
    n = 3000
    out = []
    for base in range(0, n, records_per_batch):
        out.append(
            batch(base, [(f"k{(base + i) % 400}", "v") for i in range(min(records_per_batch, n - base))])
        )
    layout(tmp_path, {0: out, n: [single(n, "z")]})
    result = clean(tmp_path, first_dirty=0, offset_map=tiny_map(3))
    assert (result.end_offset, result.map_full) == (3, True)
    assert len(data_records(tmp_path)) == n + 1  # offsets 0-2 are each their key's latest below L
    result = clean(tmp_path)  # a default map then takes the rest in one round
    assert (result.end_offset, result.map_full) == (n, False)
    assert [r[0] for r in data_records(tmp_path)] == [*range(n - 400, n), n]


def test_results_do_not_depend_on_the_dedupe_buffer_while_it_holds_the_keys(tmp_path):
    """Same files for a map that just fits, the default one and 1 GiB: slots are allocated for the work,
    the configured buffer only sets where a round would stop."""
    rng = random.Random(5)
    out, offset = [], 0
    while offset < 5000:
        n = rng.choice([1, 1, 3, 40])
        codec = rng.choice([0, 0, compression.LZ4])
        recs = [(f"key-{rng.randrange(900)}", None if rng.random() < 0.05 else "x" * rng.randrange(30))
                for _ in range(n)]  # fmt: skip
        out.append(batch(offset, recs, codec=codec))
        offset += n
    results = []
    for buffer in (MiB + 24, 128 * MiB, 1024 * MiB):  # the smallest the broker accepts holds 39k keys
        d = tmp_path / str(buffer)
        layout(d, {0: out, offset: [single(offset, "z")]})
        result = clean(d, broker=BrokerConfig(log_cleaner_dedupe_buffer_size=buffer))
        files = {
            p.name: p.read_bytes() for p in sorted(part(d).iterdir()) if not p.name.endswith("checkpoint")
        }
        results.append((result.end_offset, result.map_full, files))
    assert results[0][:2] == (offset, False)
    assert results[0] == results[1] == results[2]


def test_map_slots_are_sized_to_the_work_not_the_buffer(tmp_path):
    layout(tmp_path, {0: [single(i, f"k{i}") for i in range(100)], 100: []})
    log = open_log(tmp_path)
    bound = cleaner.keyed_bound(log, 0, 100)
    assert bound == 100  # one record per batch
    big = OffsetMap(1024 * MiB, 0.9, bound)
    default = OffsetMap(128 * MiB, 0.9, bound)
    assert big.capacity > default.capacity and big.memory_bytes == default.memory_bytes < 24 * 1000


def test_output_buffer_and_runs_smaller_than_the_data_give_the_same_files(tmp_path, monkeypatch):
    """Tiny output buffers and runs of compressed batches force every stop (write out, grow, next run)."""
    rng = random.Random(11)
    out, offset = [], 0
    while offset < 1500:
        n = rng.choice([1, 2, 60])
        codec = rng.choice([0, compression.LZ4, compression.ZSTD, compression.SNAPPY])
        out.append(
            batch(
                offset, [(f"k{rng.randrange(300)}", "v" * rng.randrange(50)) for _ in range(n)], codec=codec
            )
        )
        offset += n
    for d in ("default", "tiny"):
        layout(tmp_path / d, {0: out, offset: []})
    clean(tmp_path / "default")
    monkeypatch.setattr(cleaner_segments, "OUTPUT_BYTES", 256)
    monkeypatch.setattr(cleaner_segments.Run, "LIMIT", 3)
    clean(tmp_path / "tiny")
    a = {p.name: p.read_bytes() for p in part(tmp_path / "default").iterdir()}
    b = {p.name: p.read_bytes() for p in part(tmp_path / "tiny").iterdir()}
    assert a == b


def test_large_batches_grow_the_chunk(tmp_path):
    # A batch of 5000 records is more than a chunk holds: the kernel makes room for it.
    big = batch(0, [(f"k{i % 2500}", str(i)) for i in range(5000)])
    layout(tmp_path, {0: [big, single(5000, "k7", "new")], 5001: []})
    clean(tmp_path)
    records = data_records(tmp_path)
    assert len(records) == 2500 and records[-1] == (5000, b"k7", b"new")
    assert [r[0] for r in records[:-1]] == [i for i in range(2500, 5000) if i != 2507]


def test_legacy_entries_between_v2_batches(tmp_path):
    from tests.rules.cleaner_harness import legacy

    layout(tmp_path, {0: [legacy(0, "a", "1"), legacy(1, "b", "1"), single(2, "a", "2"), legacy(3, "b", "2", magic=0)],
                      4: []})  # fmt: skip
    clean(tmp_path)
    assert data_records(tmp_path) == [(2, b"a", b"2"), (3, b"b", b"2")]


def test_no_python_step_per_batch_for_plain_and_committed_data(tmp_path, monkeypatch):
    """The structure the issue asks for: pass 1 and pass 2 call their kernel once per segment when no
    batch needs Python (plain and committed transactional data, markers included)."""
    out, offset = [], 0
    for t in range(50):
        out += [
            txn(offset, [t % 5, t % 3], pid=7, seq=offset),
            marker(offset + 2, True, 7),
            single(offset + 3, "p"),
        ]
        offset += 4
    layout(tmp_path, {0: out, offset: []})
    calls = {"build_map": 0, "clean": 0}
    for name in calls:
        module = map_pass if name == "build_map" else clean_pass
        original = getattr(module, name)

        def counting(*args, _name=name, _original=original):
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(module, name, counting)
    clean(tmp_path, broker=KEEP_PRODUCERS)
    assert calls == {"build_map": 1, "clean": 1}


@pytest.mark.parametrize(
    "store_bytes", [0, 24 * 50, cleaner.DIGEST_STORE_BYTES], ids=["none", "overflowing", "default"]
)
def test_digests_kept_from_pass_one_give_the_same_files(tmp_path, monkeypatch, store_bytes):
    """Pass 2 takes the key digests pass 1 stored instead of hashing again: with no store, a store too
    small for a segment, or the default one, the cleaned files are the same."""
    segments, aborted = _mixed_segments(3, 150, 4, 120, lambda kind: compression.LZ4 if kind < 0.3 else 0)
    _cleaned_alike(tmp_path, monkeypatch, segments, aborted, "DIGEST_STORE_BYTES", store_bytes)


@pytest.mark.parametrize(
    "store_bytes", [0, 3000, cleaner.DECODED_STORE_BYTES], ids=["none", "overflowing", "default"]
)
def test_compressed_batches_decoded_once_for_both_passes_give_the_same_files(
    tmp_path, monkeypatch, store_bytes
):
    """Pass 1 decodes the compressed batches of a whole dirty segment once and pass 2 walks those
    records: with no store, one too small for a segment, or the default one, the cleaned files are the
    same; a segment holding a frame the kernels leave to the codec library (an lz4 frame with its content
    size) is decoded in each pass as before."""
    rng = random.Random(5)
    segments, offset, aborted = {}, 0, []
    for s in range(4):
        out = []
        segments[offset] = out
        for _ in range(120):
            n = rng.choice([1, 3, 20])
            codec = rng.choice(CODECS)
            kvs = [
                (f"k{rng.randrange(150)}", None if rng.random() < 0.05 else "v" * rng.randrange(40))
                for _ in range(n)
            ]
            if rng.random() < 0.1:
                out += [
                    batch(offset, kvs, pid=50, epoch=0, seq=offset, txn=True, codec=codec),
                    marker(offset + n, False, 50),
                ]
                aborted.append((offset, offset + n))
                offset += n + 1
            else:
                out.append(batch(offset, kvs, codec=codec))
                offset += n
        if s == 2:  # a frame only the lz4 library reads: this segment is decoded pass by pass
            frame = lz4.frame.compress(record_area([b"v"]), block_linked=False, store_size=True)
            out.append(raw_batch(offset, 1, frame, compression.LZ4))
            offset += 1
    segments[offset] = [single(offset, "z")]
    _cleaned_alike(tmp_path, monkeypatch, segments, aborted, "DECODED_STORE_BYTES", store_bytes)


@pytest.mark.parametrize("codec", [compression.LZ4, compression.ZSTD], ids=["lz4", "zstd"])
def test_a_segment_that_opens_with_a_run_of_plain_batches_is_not_decoded_ahead_and_cleans_the_same(
    tmp_path, monkeypatch, codec
):
    """A segment whose first batches are uncompressed (PLAIN_LEAD_BATCHES of them) is not decoded before
    pass 1 -- its compressed batches further on are decoded by each pass -- and is left with the same
    files as with no store at all; a segment that opens with a compressed batch is decoded ahead."""
    lead = decoded_areas.PLAIN_LEAD_BATCHES
    plain_first = [single(i, f"k{i % 40}") for i in range(lead)]
    plain_first += [
        batch(lead + 3 * j, [(f"k{(j + k) % 40}", "w") for k in range(3)], codec=codec) for j in range(30)
    ]
    packed_first = [
        batch(1000 + 3 * j, [(f"k{(j + k) % 40}", "x") for k in range(3)], codec=codec) for j in range(30)
    ]
    packed_first += [single(1090 + i, f"k{i % 40}") for i in range(lead)]
    segments = {0: plain_first, 1000: packed_first, 2000: [single(2000, "z")]}
    layout(tmp_path / "probe", segments)
    first, second = open_log(tmp_path / "probe").segments[:2]
    assert (
        cleaner_segments.decode_areas(first, cleaner.DECODED_STORE_BYTES, compression.MAX_BATCH_BYTES) is None
    )
    assert cleaner_segments.decode_areas(second, cleaner.DECODED_STORE_BYTES, compression.MAX_BATCH_BYTES)[
        1
    ].shape == (30, 2)
    _cleaned_alike(tmp_path, monkeypatch, segments, [], "DECODED_STORE_BYTES", cleaner.DECODED_STORE_BYTES)


def _mixed_segments(
    seed: int, batches: int, larger: int, keys: int, codec: Callable[[float], int]
) -> tuple[dict[int, list[bytes]], list[tuple[int, int]]]:
    """Four segments of ``batches`` batches of 1 or ``larger`` records over ``keys`` keys, a tenth of them
    aborted transactions of producer 50, the others compressed with ``codec(draw)`` (``draw`` >= 0.1), and
    an active segment: the segments and the aborted ranges."""
    rng = random.Random(seed)
    segments, offset, aborted = {}, 0, []
    for _ in range(4):
        out = []
        segments[offset] = out
        for _ in range(batches):
            n = rng.choice([1, 1, larger])
            kind = rng.random()
            kvs = [(f"k{rng.randrange(keys)}", None if rng.random() < 0.05 else "v") for _ in range(n)]
            if kind < 0.1:
                out += [
                    batch(offset, kvs, pid=50, epoch=0, seq=offset, txn=True),
                    marker(offset + n, False, 50),
                ]
                aborted.append((offset, offset + n))
                offset += n + 1
            else:
                out.append(batch(offset, kvs, codec=codec(kind)))
                offset += n
    segments[offset] = [single(offset, "z")]
    return segments, aborted


def _zstd_half(kind: float) -> int:
    return compression.ZSTD if kind < 0.55 else 0


@pytest.mark.parametrize("mapped_bytes", [6000, cleaner.MAPPED_SEGMENT_BYTES], ids=["one-segment", "default"])
def test_segments_kept_mapped_from_pass_one_for_pass_two_give_the_same_files(
    tmp_path, monkeypatch, mapped_bytes
):
    """Pass 2 walks the segments pass 1 left mapped (within MAPPED_SEGMENT_BYTES) instead of mapping
    them again: with none kept, one, or all of them, the cleaned files are the same."""
    segments, aborted = _mixed_segments(7, 100, 5, 100, _zstd_half)
    _cleaned_alike(tmp_path, monkeypatch, segments, aborted, "MAPPED_SEGMENT_BYTES", mapped_bytes)


def test_a_segment_is_mapped_once_for_both_passes_within_the_budget(tmp_path, monkeypatch):
    """With the default MAPPED_SEGMENT_BYTES every segment the round rewrites is read (mapped) once for
    both passes; with none kept mapped, at least once per pass."""
    segments, _ = _mixed_segments(8, 100, 5, 100, _zstd_half)
    reads: list[str] = []
    read_log = log_file.read_log

    def counting(path, *args, **kwargs):
        reads.append(str(path))
        return read_log(path, *args, **kwargs)

    monkeypatch.setattr(log_file, "read_log", counting)
    counts = {}
    for budget in (0, cleaner.MAPPED_SEGMENT_BYTES):
        layout(tmp_path / str(budget), segments)
        log = open_log(tmp_path / str(budget))
        producers = producer_state.build_producer_table(log, NOW, FORGET_PRODUCERS.producer_id_expiration_ms)
        the_plan = cleaner.plan_cleaning(log, COMPACT, FORGET_PRODUCERS, NOW, producers)
        monkeypatch.setattr(cleaner, "MAPPED_SEGMENT_BYTES", budget)
        reads.clear()
        result = cleaner.clean_log(log, the_plan, COMPACT, FORGET_PRODUCERS, NOW, producers)
        assert result.groups >= 1
        rewritten = [str(s.log_path) for s in log.segments if s.base_offset < result.end_offset]
        counts[budget] = [reads.count(path) for path in rewritten]
    assert counts[cleaner.MAPPED_SEGMENT_BYTES] == [1, 1, 1, 1]
    assert min(counts[0]) >= 2 and len(counts[0]) == 4


def _cleaned_alike(tmp_path, monkeypatch, segments, aborted, setting: str, value: int) -> None:
    """The partition (aborted transactions of producer 50) cleaned with ``cleaner.<setting>`` at 0 and at
    ``value`` is left with the same files."""
    for d in ("reference", "stored"):
        layout(tmp_path / d, segments)
        write_txnindex(part(tmp_path / d), 0, [(50, f, last, f) for f, last in aborted])
    monkeypatch.setattr(cleaner, setting, 0)
    clean(tmp_path / "reference", broker=FORGET_PRODUCERS)
    monkeypatch.setattr(cleaner, setting, value)
    clean(tmp_path / "stored", broker=FORGET_PRODUCERS)
    assert _files(tmp_path / "reference") == _files(tmp_path / "stored")
