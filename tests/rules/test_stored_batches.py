"""Pass 2 of one-record batches from pass 1's digest store (``clean_pass._stored_batches``): a one-record
uncompressed batch whose keyed record pass 1 stored is cleaned without walking it again (a tombstone's
record alone is walked), every other batch in a chunk as before.

Every case is pinned against the walked path: the same partition cleaned with no digest store
(``DIGEST_STORE_BYTES`` 0: every record walked and hashed in pass 2) must be left with the same files, and
the cleaned directory is re-read with kafka-python and its indexes recomputed (``check_dir``). The store's
rows are checked against the readable reader's batches.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.record_batch import Record
from kafka_log_core.kernels import clean_pass, digest_store
from kafka_log_core.rules import cleaner, cleaner_segments
from tests.logbuild import TS, batch, marker
from tests.rules.cleaner_harness import (
    BROKER,
    COMPACT,
    DAY,
    FORGET_PRODUCERS,
    KEEP_PRODUCERS,
    NOW,
    clean,
    data_records,
    decode_log,
    layout,
    open_log,
    part,
    single,
    write_txnindex,
)


def _files(log_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in part(log_dir).iterdir()}


def _count_stored(monkeypatch) -> list[int]:
    """The batches pass 2 cleaned from the store, summed over its kernel calls."""
    seen = [0]
    original = clean_pass.clean

    def counting(*args):
        status = original(*args)
        st = args[-1]
        seen[0] = int(st["stored_batches"][0])  # the round's state: a running count
        return status

    monkeypatch.setattr(clean_pass, "clean", counting)
    return seen


def _walked_and_stored(tmp_path, monkeypatch, segments, aborted=(), rounds=(NOW,), broker=FORGET_PRODUCERS):
    """The partition cleaned (a round at each time of ``rounds``) with no store and with the default one:
    the files of both are the same. Returns the batches the stored run cleaned from the store."""
    for d in ("walked", "stored"):
        layout(tmp_path / d, segments)
        write_txnindex(part(tmp_path / d), 0, [(50, f, last, f) for f, last in aborted])
    monkeypatch.setattr(cleaner, "DIGEST_STORE_BYTES", 0)
    for now in rounds:
        clean(tmp_path / "walked", now=now, broker=broker)
    monkeypatch.setattr(cleaner, "DIGEST_STORE_BYTES", digest_store.STORE_WORDS * 8 * 100_000)
    stored = _count_stored(monkeypatch)
    total = 0
    for now in rounds:
        clean(tmp_path / "stored", now=now, broker=broker)
        total += stored[0]
    assert _files(tmp_path / "walked") == _files(tmp_path / "stored")
    return total


def _mixed(seed: int, n: int = 400) -> tuple[dict[int, list[bytes]], list[tuple[int, int]]]:
    """Segments of mostly one-record batches, and among them every batch the store cannot stand for:
    tombstones, keyless records, compressed one-record batches, batches of several records, aborted and
    committed transactions with their markers, runs of keyless batches one after another."""
    rng = random.Random(seed)
    segments, offset, aborted = {}, 0, []
    for _ in range(3):
        out = []
        segments[offset] = out
        for _ in range(n):
            kind = rng.random()
            key = f"k{rng.randrange(90)}"
            if kind < 0.6:
                out.append(single(offset, key, "v" * rng.randrange(30)))
                offset += 1
            elif kind < 0.7:
                out.append(single(offset, key, None))  # a tombstone
                offset += 1
            elif kind < 0.75:
                for _ in range(rng.randrange(1, 6)):  # keyless, several in a row
                    out.append(batch(offset, [(None, "nokey")]))
                    offset += 1
            elif kind < 0.82:
                codec = rng.choice([compression.LZ4, compression.ZSTD, compression.GZIP, compression.SNAPPY])
                out.append(batch(offset, [(key, "c")], codec=codec))
                offset += 1
            elif kind < 0.9:
                m = rng.randrange(2, 5)
                out.append(batch(offset, [(f"k{rng.randrange(90)}", "m") for _ in range(m)]))
                offset += m
            else:
                commit = rng.random() < 0.5
                out += [
                    batch(offset, [(key, "t")], pid=50, epoch=0, seq=offset, txn=True),
                    marker(offset + 1, commit, 50),
                ]
                if not commit:
                    aborted.append((offset, offset + 1))
                offset += 2
    segments[offset] = [single(offset, "z")]
    return segments, aborted


@pytest.mark.parametrize("seed", [1, 2])
def test_one_record_batches_cleaned_from_the_store_leave_the_files_of_the_walk(tmp_path, monkeypatch, seed):
    """A first round (tombstones kept and stamped with a delete horizon) and a round past the horizon
    (tombstones removed): the same files as when every record is walked, and most batches came from the
    store."""
    segments, aborted = _mixed(seed)
    layout(tmp_path / "input", segments)
    dirty = [b for path in sorted(part(tmp_path / "input").glob("*.log"))[:-1] for b in decode_log(path)]
    candidates = [b for b in dirty if b.count == 1 and not b.codec and not b.is_control and b.records[0].key]
    stored = _walked_and_stored(tmp_path, monkeypatch, segments, aborted, rounds=(NOW, NOW + 2 * DAY))
    assert stored > len(candidates) // 2  # the walk takes the batches after a run of others


def test_a_full_output_buffer_stops_and_resumes_inside_a_run_of_stored_batches(tmp_path, monkeypatch):
    segments, aborted = _mixed(3, 200)
    monkeypatch.setattr(cleaner_segments, "OUTPUT_BYTES", 300)  # a stop every other batch
    assert _walked_and_stored(tmp_path, monkeypatch, segments, aborted) > 0


def test_the_last_batch_of_a_producer_is_kept_empty_from_the_store_as_walked(tmp_path, monkeypatch):
    """Idempotent producers' one-record batches: the last of each producer stays (empty when its record
    is superseded), read from the store as from the walk."""
    out = [single(i, f"k{i % 3}", "v", pid=7 + i % 2, epoch=0, seq=i // 2) for i in range(40)]
    out += [single(40 + i, f"k{i % 3}", "w") for i in range(6)]  # supersede every key
    segments = {0: out, 46: [single(46, "z")]}
    assert _walked_and_stored(tmp_path, monkeypatch, segments, broker=KEEP_PRODUCERS) >= 40


def test_a_record_whose_offset_is_not_its_batch_base_is_matched_by_its_batch_position(tmp_path, monkeypatch):
    """The store's row of a record names its batch by position, not by offset: a keyless batch at 10
    followed by a batch at 11 whose one record claims offset 10 (hostile: offset delta -1) -- a row
    matched by offset would give the keyless batch the next one's key. Cleaned as the walk cleans it."""
    head = [single(i, f"k{i}") for i in range(10)]
    keyless = batch(10, [(None, "nokey")])
    behind = record_batch.build_batch(11, [Record(10, TS, b"k1", b"behind", ())], last_offset_delta=0)
    segments = {0: [*head, keyless, behind, single(12, "k2")], 13: [single(13, "z")]}
    for d in ("walked", "stored"):
        layout(tmp_path / d, segments)
    for d, store_bytes in (("walked", 0), ("stored", cleaner.DIGEST_STORE_BYTES)):
        monkeypatch.setattr(cleaner, "DIGEST_STORE_BYTES", store_bytes)
        log = open_log(tmp_path / d)  # no check_dir: a record below its batch's base offset is kept
        cleaner.clean_log(log, cleaner.plan_cleaning(log, COMPACT, BROKER, NOW), COMPACT, BROKER, NOW)
    assert _files(tmp_path / "walked") == _files(tmp_path / "stored")
    kept = [0, *range(3, 10), 10, 12, 13]  # k1 superseded by "behind" (at 10), k2 at 12; keyless dropped
    assert [r[0] for r in data_records(tmp_path / "stored")] == kept


def test_store_rows_name_the_batch_and_the_tombstone_of_each_keyed_record(tmp_path):
    """Pass 1's rows of a segment (a store of STORE_WORDS): each keyed record's offset with the position
    of its batch and whether its value is null, as the readable reader sees them."""
    segments, _ = _mixed(4, 150)
    layout(tmp_path, segments)
    log = open_log(tmp_path)
    digests: dict[int, np.ndarray] = {}
    first = log.segments[0]
    offset_map = cleaner.OffsetMap(24 * 4096, 0.75)
    cleaner.build_offset_map(log, 0, log.segments[1].base_offset, offset_map, digests=digests)
    rows = digests[first.base_offset]
    want, position = [], 0
    for b in decode_log(first.log_path):  # kafka-python's reading, batch by batch
        if not b.is_control:
            want += [(r.offset, position, r.value is None) for r in b.records if r.key is not None]
        position += len(b.raw)
    got = []
    for i in range(rows.shape[0]):
        at, tombstone = digest_store.stored_batch(rows, i)
        got.append((int(rows[i, digest_store.S_OFFSET]), int(at), bool(tombstone)))
    assert got == want
