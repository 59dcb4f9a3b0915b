"""Where a compressed shape's time goes, the codec phases apart: ``python -m bench.phases SEGMENT...``.

For the sealed segments given (a sweep shape's partition without its active segment), in one process,
CPU seconds of each part alone, best of ``--repeat``:

* ``decompress``: every batch's record area decompressed as the passes do it (the kernels' decoders over
  the whole segment in one call);
* ``scan``: what every pass does before its decisions: framing, CRC32C, decompression, the record walk
  and the key digests (``chunk_walk.walk_segment``);
* ``recompress_all``: every batch's records compressed again (``codec_kernels.compress_area``) -- the most
  pass 2 can pay for it, when every batch loses a record;
* ``write_fsync``: the segments' bytes written to a new file and fsynced, as ``.cleaned`` is.

``bench.probe compact --phases`` gives pass 1 and the total beside it; ``docs/benchmark.md`` has the
table this makes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
from numba import njit

from kafka_log_core.format import compression, log_file
from kafka_log_core.format.compression import MAX_BATCH_BYTES
from kafka_log_core.format.record_batch import ATTRIBUTES_OFFSET, CODEC_MASK, HEADER_SIZE, LOG_OVERHEAD
from kafka_log_core.kernels import chunk_walk, codec_kernels, fields
from kafka_log_core.kernels.batch_header import BATCH_LENGTH_AT
from kafka_log_core.kernels.fields import read_i32
from kafka_log_core.rules.cleaner_segments import new_karea

_GZIP, _SNAPPY = int(compression.GZIP), int(compression.SNAPPY)
_LZ4, _ZSTD = int(compression.LZ4), int(compression.ZSTD)


@njit(cache=True)
def _batches(buf):
    """(position, size, codec) of every batch of a segment."""
    n = 0
    pos = 0
    out = np.empty((buf.shape[0] // HEADER_SIZE + 1, 3), dtype=np.int64)
    while pos + LOG_OVERHEAD <= buf.shape[0]:
        size = read_i32(buf, pos + BATCH_LENGTH_AT) + LOG_OVERHEAD
        out[n, 0] = pos
        out[n, 1] = size
        out[n, 2] = np.int64(buf[pos + ATTRIBUTES_OFFSET + 1]) & CODEC_MASK
        n += 1
        pos += size
    return out[:n]


@njit(cache=True)
def _decompress_all(buf, rows, codecs, dst):
    """Every compressed batch decoded into ``dst`` (each from its start). Returns the bytes decoded."""
    total = 0
    for i in range(rows.shape[0]):
        pos, size, codec = rows[i, 0], rows[i, 1], rows[i, 2]
        start, end = pos + HEADER_SIZE, pos + size
        if codec == _LZ4:
            status, out = codec_kernels.lz4_frame(codecs, buf, start, end, dst, 0, dst.shape[0])
        elif codec == _ZSTD:
            status, out = codec_kernels.zstd_frames(codecs, buf, start, end, dst, 0, dst.shape[0])
        elif codec == _SNAPPY:
            status, out = codec_kernels.snappy_stream(buf, start, end, dst, 0, dst.shape[0])
        elif codec == _GZIP:
            status, out = codec_kernels.gzip_members(codecs, buf, start, end, dst, 0, dst.shape[0])
        else:
            continue
        if status != codec_kernels.LZ4_OK:
            return -1
        total += out
    return total


@njit(cache=True)
def compress_all(areas, bounds, codec, codecs, dst):
    """Each ``areas[bounds[i, 0]:bounds[i, 1]]`` compressed by ``codec_kernels.compress_area`` into ``dst``."""
    total = 0
    for i in range(bounds.shape[0]):
        total += codec_kernels.compress_area(
            codecs, codec, areas, bounds[i, 0], bounds[i, 1] - bounds[i, 0], dst, 0
        )
    return total


def packed(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` one after the other, and each one's (start, end) in them."""
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    bounds = np.ascontiguousarray(np.stack([np.cumsum(sizes) - sizes, np.cumsum(sizes)], axis=1))
    return fields.as_bytes(b"".join(parts)), bounds


def _best(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _segment(path: str, repeat: int, karea: tuple, dst: np.ndarray) -> dict[str, float]:
    buf = fields.as_bytes(log_file.read_log(path))
    rows = _batches(buf)
    codec = int(rows[0, 2]) if rows.shape[0] else 0
    view = buf.data
    raw = [compression.decompress(codec, view[p + HEADER_SIZE : p + s]) for p, s, _ in rows.tolist()]
    parts = {"batches": float(rows.shape[0])}
    codecs = karea[2]
    _decompress_all(buf, rows, codecs, dst)  # compiled and warm before the clock starts
    parts["decompress"] = _best(repeat, lambda: _decompress_all(buf, rows, codecs, dst))
    parts["scan"] = _best(
        repeat, lambda: chunk_walk.walk_segment(buf, 0, buf.shape[0], *karea, MAX_BATCH_BYTES)
    )
    areas, bounds = packed(raw)
    out = np.empty(2 * int((bounds[:, 1] - bounds[:, 0]).max(initial=0)) + 1024, dtype=np.uint8)
    parts["recompress_all"] = _best(repeat, lambda: compress_all(areas, bounds, codec, codecs, out))

    def write() -> None:
        with tempfile.NamedTemporaryFile(prefix="bench-phases-") as f:
            f.write(view)
            f.flush()
            os.fsync(f.fileno())

    parts["write_fsync"] = _best(repeat, write)
    return parts


def measure(paths: list[str], repeat: int) -> dict:
    karea = new_karea()
    dst = np.empty(MAX_BATCH_BYTES, dtype=np.uint8)
    total: dict[str, float] = {}
    for path in paths:
        for name, seconds in _segment(path, repeat, karea, dst).items():
            total[name] = total.get(name, 0.0) + seconds
    batches = int(total.pop("batches", 0))
    return {"segments": len(paths), "batches": batches, "parts_cpu_seconds": total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.phases")
    parser.add_argument("segments", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(measure(args.segments, args.repeat)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
