"""Where a compressed shape's clean goes, the codec library apart: ``python -m bench.codec_parts LOG_DIR``.

In one warm process (every kernel and codec loaded, the shape cleaned once before), ``--repeat`` cleans of
fresh copies of LOG_DIR (``tasks.compact_partition``, as the sweep runs ours), and for the median one the CPU
seconds of each part, each kernel call timed apart:

* ``decode_ahead``: the segments' compressed batches decoded once for both passes (``decode_areas``);
* ``pass1``, ``pass2``: the two kernels; ``offsets``: the offsets pre-check; ``fsync``;
* ``rest``: what is left (opening, the plan, writing the output, the indexes, the swap: Python's share).

Then the codec library's share of pass 2 apart: one more clean with this thread's compressors taken out of
its ``CODECS`` table (the batches that lose records then come back to Python as holes: the path an
environment without the library takes) records the exact bytes pass 2 hands the compressor (each rebuilt
batch's kept records); ``compressor`` is those compressed again by ``codec_kernels.compress_area`` alone
(median of ``--repeat``), ``pass2_without_compressor`` is pass 2 minus it, ``crc32c`` is CRC32C over them.

For zstd, ``kafka_like``: what Kafka's cleaner asks of the same libzstd for the same batches, called in C the
way zstd-jni calls it: each batch decompressed by a fresh streaming decompressor in each of the two passes
(``ZstdCompression.wrapForInput``: a new ``ZstdInputStreamNoFinalizer`` per batch), each rebuilt batch
compressed by a fresh streaming compressor at level 3, content size unknown, fed 16 KiB at a time
(``wrapForOutput``: a ``BufferedOutputStream`` of 16 KiB over a new ``ZstdOutputStreamNoFinalizer``); beside
it ``ours_decoder_alone``, the kernels' decoder over the same batches into a warm buffer.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numba import njit

from bench.phases import compress_all, packed
from bench.probe import _warm_compaction
from kafka_log_core.format import compression
from kafka_log_core.format.record_batch import ATTRIBUTES_OFFSET, CODEC_MASK, HEADER_SIZE
from kafka_log_core.kernels import clean_pass, codec_kernels, crc32c, map_pass, native_codecs, offset_order
from kafka_log_core.rules import cleaner, cleaner_segments

SETS = ["cleanup.policy=compact", "segment.bytes=16777216", "min.cleanable.dirty.ratio=0.01"]
KAFKA_CHUNK = 16 * 1024  # Kafka's BufferedOutputStream over the zstd stream
_PARTS = (
    (map_pass, "build_map", "pass1"),
    (clean_pass, "clean", "pass2"),
    (offset_order, "check_offsets", "offsets"),
    (cleaner, "decode_areas", "decode_ahead"),
    (os, "fsync", "fsync"),
)


class _Timed:
    """The CPU seconds of each part of ``_PARTS`` while installed (the module attributes wrapped)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self._saved = [(module, name, getattr(module, name)) for module, name, _ in _PARTS]
        for (module, name, label), (_, _, fn) in zip(_PARTS, self._saved, strict=True):
            setattr(module, name, self._timed(fn, label))

    def _timed(self, fn: Callable, label: str) -> Callable:
        def call(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.process_time() - t

        return call

    def remove(self) -> None:
        for module, name, fn in self._saved:
            setattr(module, name, fn)


def _clean_copy(source: Path, timed: _Timed) -> tuple[float, dict[str, float]]:
    from jobs.context import job_options, list_tasks
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import compact_partition

    configs, opts = load_config(None, [], [], SETS), job_options(None)
    with tempfile.TemporaryDirectory(prefix="bench-codec-parts-") as tmp:
        target = Path(tmp) / "d"
        shutil.copytree(source, target)
        tasks = list_tasks([str(target)], None, writing=True).tasks
        timed.seconds.clear()
        t = time.process_time()
        for task in tasks:
            compact_partition(task, configs, opts)
        return time.process_time() - t, dict(timed.seconds)


def _rebuilt_inputs(source: Path, timed: _Timed) -> tuple[int, list[bytes], float]:
    """The records pass 2 hands the compressor (one bytes per batch that loses records) and pass 2's CPU
    seconds without it: a clean with this thread's compressors out of its table."""
    captured: list[tuple[int, bytes]] = []
    frame = cleaner_segments._frame_holes

    def capture(holes, source_buf, scratch):
        for position, start, length in zip(holes["source_position"].tolist(), holes["hole_start"].tolist(),
                                           holes["hole_length"].tolist(), strict=True):  # fmt: skip
            codec = int(source_buf[position + ATTRIBUTES_OFFSET + 1]) & CODEC_MASK
            captured.append((codec, bytes(scratch[start : start + length])))
        return frame(holes, source_buf, scratch)

    table = native_codecs.codecs()
    without = table.copy()
    for slot in (native_codecs.C_ZSTD_COMPRESS, native_codecs.C_LZ4_COMPRESS, native_codecs.C_GZIP_COMPRESS):
        without[slot] = 0
    without.flags.writeable = False
    cleaner_segments._frame_holes = capture
    native_codecs._LOCAL.codecs = without
    try:
        _clean_copy(source, timed)  # numba's code for the hole path loaded
        captured.clear()
        _, parts = _clean_copy(source, timed)
    finally:
        native_codecs._LOCAL.codecs = table
        cleaner_segments._frame_holes = frame
    codecs = {codec for codec, _ in captured}
    if len(codecs) != 1:
        raise SystemExit(f"expected one codec among the rebuilt batches, found {sorted(codecs)}")
    return codecs.pop(), [data for _, data in captured], parts.get("pass2", 0.0)


@njit(cache=True)
def _crc_all(areas, bounds):
    total = 0
    for i in range(bounds.shape[0]):
        total += crc32c.crc32c(areas, bounds[i, 0], bounds[i, 1] - bounds[i, 0])
    return total


def _median(repeat: int, fn: Callable[[], object]) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def _zstd_areas(source: Path) -> list[bytes]:
    """The record areas (compressed) of every zstd batch of the partition's sealed segments."""
    from kafka_log_core.format import log_file

    areas = []
    for d in source.iterdir():
        logs = sorted(d.glob("*.log"))
        for path in logs[:-1]:  # the active segment is not cleaned
            for batch in log_file.iter_batches(log_file.read_log(str(path)), path, 0, strict=True):
                if batch.compression == compression.ZSTD:
                    areas.append(bytes(batch.data[HEADER_SIZE:]))
    return areas


# the libzstd calls Kafka's streams make (zstd-jni), as numba intrinsics like the kernels' own
_create = native_codecs._caller(64, (64,))  # ZSTD_createCCtx(void)/createDCtx(void): the argument is ignored
_free = native_codecs._caller(64, (64,))
_set = native_codecs._caller(64, (64, 32, 32))  # ZSTD_CCtx_setParameter
_stream = native_codecs._caller(64, (64, 64, 64, 32))  # ZSTD_compressStream2(cctx, out, in, end_op)
_dstream = native_codecs._caller(64, (64, 64, 64))  # ZSTD_decompressStream(dctx, out, in)
_CONTINUE, _END = 0, 2  # ZSTD_e_continue, ZSTD_e_end
_F_CCTX, _F_FREE_C, _F_SET, _F_STREAM, _F_DCTX, _F_FREE_D, _F_DSTREAM = range(7)


def _kafka_functions() -> np.ndarray:
    lib = native_codecs._zstd_library()
    if lib is None:
        raise SystemExit("no libzstd (the zstandard wheel)")
    names = ("ZSTD_createCCtx", "ZSTD_freeCCtx", "ZSTD_CCtx_setParameter", "ZSTD_compressStream2",
             "ZSTD_createDCtx", "ZSTD_freeDCtx", "ZSTD_decompressStream")  # fmt: skip
    return np.array([native_codecs._address(lib, name) for name in names], dtype=np.int64)


@njit(cache=True)
def _kafka_compress(fns, level, src, bounds, dst):
    """Each batch through a fresh streaming compressor at ``level``, content size unknown, written 16 KiB at
    a time, then ended: a new ``ZstdOutputStreamNoFinalizer`` under Kafka's ``BufferedOutputStream``."""
    total = 0
    inb = np.zeros(3, dtype=np.int64)  # ZSTD_inBuffer / ZSTD_outBuffer: pointer, size, pos
    outb = np.zeros(3, dtype=np.int64)
    for i in range(bounds.shape[0]):
        cctx = _create(fns[_F_CCTX], (np.int64(0),))
        _set(fns[_F_SET], (cctx, np.int64(native_codecs._ZSTD_C_LEVEL), np.int64(level)))
        outb[0], outb[1], outb[2] = np.int64(dst.ctypes.data), dst.shape[0], 0
        at = bounds[i, 0]
        while at < bounds[i, 1]:
            n = min(KAFKA_CHUNK, bounds[i, 1] - at)
            inb[0], inb[1], inb[2] = np.int64(src.ctypes.data + at), n, 0
            _stream(
                fns[_F_STREAM],
                (cctx, np.int64(outb.ctypes.data), np.int64(inb.ctypes.data), np.int64(_CONTINUE)),
            )
            at += n
        inb[1] = inb[2] = 0
        _stream(fns[_F_STREAM], (cctx, np.int64(outb.ctypes.data), np.int64(inb.ctypes.data), np.int64(_END)))
        total += outb[2]
        _free(fns[_F_FREE_C], (cctx,))
    return total


@njit(cache=True)
def _kafka_decompress(fns, src, bounds, dst):
    """Each batch through a fresh streaming decompressor, read 16 KiB at a time: a new
    ``ZstdInputStreamNoFinalizer`` (Kafka's ``wrapForInput``), once per pass."""
    total = 0
    inb = np.zeros(3, dtype=np.int64)
    outb = np.zeros(3, dtype=np.int64)
    for i in range(bounds.shape[0]):
        dctx = _create(fns[_F_DCTX], (np.int64(0),))
        inb[0], inb[1], inb[2] = np.int64(src.ctypes.data + bounds[i, 0]), bounds[i, 1] - bounds[i, 0], 0
        while True:
            outb[0], outb[1], outb[2] = np.int64(dst.ctypes.data), KAFKA_CHUNK, 0
            left = _dstream(fns[_F_DSTREAM], (dctx, np.int64(outb.ctypes.data), np.int64(inb.ctypes.data)))
            total += outb[2]
            failed = left < 0 and left >= -native_codecs.ZSTD_MAX_ERROR  # ZSTD_isError
            if left == 0 or failed or (outb[2] == 0 and inb[2] == inb[1]):
                break
        _free(fns[_F_FREE_D], (dctx,))
    return total


def _kafka_like(areas: list[bytes], rebuilt: list[bytes], repeat: int) -> dict[str, float]:
    fns = _kafka_functions()
    src, bounds = packed(areas)
    records, rebuilt_bounds = packed(rebuilt)
    dst = np.empty(2 * int(records.shape[0] // max(len(rebuilt), 1)) + (4 << 20), dtype=np.uint8)
    decode = _median(repeat, lambda: _kafka_decompress(fns, src, bounds, dst))
    compress = _median(
        repeat, lambda: _kafka_compress(fns, compression.ZSTD_LEVEL, records, rebuilt_bounds, dst)
    )
    ours = _median(repeat, lambda: _decode_all(native_codecs.codecs(), src, bounds, dst))
    return {"decode_both_passes": 2 * decode, "compressor": compress, "total": 2 * decode + compress,
            "ours_decoder_alone": ours}  # fmt: skip


@njit(cache=True)
def _decode_all(codecs, src, bounds, dst):
    """Each batch decoded from its start of ``dst`` as the kernels decode it (``zstd_frames``)."""
    total = 0
    for i in range(bounds.shape[0]):
        _, end = codec_kernels.zstd_frames(codecs, src, bounds[i, 0], bounds[i, 1], dst, 0, dst.shape[0])
        total += end
    return total


def measure(source: Path, repeat: int) -> dict:
    _warm_compaction(SETS)
    timed = _Timed()
    try:
        _clean_copy(source, timed)  # once, untimed: the process as a worker after its first partition
        runs = sorted((_clean_copy(source, timed) for _ in range(repeat)), key=lambda run: run[0])
        total, parts = runs[len(runs) // 2]
        codec, rebuilt, pass2_holes = _rebuilt_inputs(source, timed)
    finally:
        timed.remove()
    areas, bounds = packed(rebuilt)
    codecs = native_codecs.codecs()
    out = np.empty(2 * int((bounds[:, 1] - bounds[:, 0]).max()) + 4096, dtype=np.uint8)
    compressor = _median(repeat, lambda: compress_all(areas, bounds, codec, codecs, out))
    result = {
        "total": total,
        "parts": {**parts, "rest": total - sum(parts.values())},
        "rebuilt_batches": len(rebuilt),
        "rebuilt_bytes": int(areas.shape[0]),
        "compressor": compressor,
        "pass2_without_compressor": parts.get("pass2", 0.0) - compressor,
        "pass2_with_holes_left_to_python": pass2_holes,
        "crc32c_of_rebuilt": _median(repeat, lambda: _crc_all(areas, bounds)),
        "totals_of_all_runs": [run[0] for run in runs],
    }
    if codec == compression.ZSTD:
        result["kafka_like"] = _kafka_like(_zstd_areas(source), rebuilt, repeat)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codec_parts")
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(measure(args.log_dir, args.repeat)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
