"""The codecs the compiled passes run through the libraries' C entry points (``native_codecs``): the same
bytes as the readable writer (``compression.compress``, which calls the libraries through their Python
packages), records decoded as the readable reader decodes them, and decompression bounded."""

from __future__ import annotations

import numpy as np
import pytest

from kafka_log_core.format import compression
from kafka_log_core.kernels import codec_kernels, native_codecs

SIZES = [0, 1, 100, 4095, 65_535, 65_536, 65_537, 200_000]
PATTERNS = {
    "random": lambda rng, n: rng.integers(0, 256, n, dtype=np.uint8),
    "few symbols": lambda rng, n: rng.integers(0, 4, n, dtype=np.uint8),
    "repeated text": lambda rng, n: np.frombuffer(
        (b"key-17 value value value " * (n // 25 + 1))[:n], np.uint8
    ),
}


@pytest.fixture(scope="module")
def codecs():
    table = native_codecs.codecs()
    if not table[native_codecs.C_ZSTD_COMPRESS] or not table[native_codecs.C_LZ4_COMPRESS]:
        pytest.fail("the zstandard and lz4 wheels must export the codec entry points the kernels call")
    return table


def _compressed_by_kernel(codecs, codec: int, data: np.ndarray, at: int = 5) -> bytes:
    bound = codec_kernels.compress_bound(codecs, codec, data.shape[0])
    dst = np.zeros(at + bound, dtype=np.uint8)
    end = codec_kernels.compress_area(codecs, codec, data, 0, data.shape[0], dst, at)
    assert end >= at
    return dst[at:end].tobytes()


@pytest.mark.parametrize("codec", [compression.LZ4, compression.ZSTD], ids=["lz4", "zstd"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_records_compressed_in_the_kernel_are_the_bytes_the_readable_writer_writes(codecs, codec, pattern):
    rng = np.random.default_rng(26)
    for n in SIZES:
        data = np.ascontiguousarray(PATTERNS[pattern](rng, n))
        written = _compressed_by_kernel(codecs, int(codec), data)
        assert written == compression.compress(codec, data.tobytes()), n
        assert compression.decompress(codec, written) == data.tobytes()


def test_zstd_frames_decoded_in_the_kernel_equal_the_readable_reader(codecs):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 8, 300_000, dtype=np.uint8).tobytes()
    # two frames back to back, as a batch written by two flushes of a stream may hold
    frames = np.frombuffer(compression.compress(compression.ZSTD, data[:1000]) + compression.compress(
        compression.ZSTD, data[1000:]), dtype=np.uint8)  # fmt: skip
    dst = np.zeros(400_000, dtype=np.uint8)
    status, end = codec_kernels.zstd_frames(codecs, frames, 0, frames.shape[0], dst, 3, len(data))
    assert status == codec_kernels.LZ4_OK
    assert dst[3:end].tobytes() == data == compression.decompress(compression.ZSTD, frames.tobytes())


def test_zstd_frames_past_the_limit_or_the_buffer_are_not_decoded(codecs):
    data = bytes(1_000_000)  # a small bomb
    frame = np.frombuffer(compression.compress(compression.ZSTD, data), dtype=np.uint8)
    small = np.zeros(100_000, dtype=np.uint8)
    status, _ = codec_kernels.zstd_frames(codecs, frame, 0, frame.shape[0], small, 0, len(data))
    assert status == codec_kernels.LZ4_NEEDS_ROOM  # the caller grows the buffer up to the limit
    large = np.zeros(2_000_000, dtype=np.uint8)
    status, _ = codec_kernels.zstd_frames(codecs, frame, 0, frame.shape[0], large, 0, len(data) - 1)
    assert status == codec_kernels.LZ4_NOT_MINE  # the readable reader refuses it with the limit's message
    with pytest.raises(compression.CompressionError, match="more than 999999 bytes"):
        compression.decompress(compression.ZSTD, frame.tobytes(), limit=len(data) - 1)


def test_corrupt_zstd_frames_are_left_to_the_readable_reader(codecs):
    frame = bytearray(compression.compress(compression.ZSTD, b"some records " * 100))
    frame[len(frame) // 2] ^= 0xFF
    frame[-3] ^= 0x55
    src = np.frombuffer(bytes(frame), dtype=np.uint8)
    dst = np.zeros(10_000, dtype=np.uint8)
    status, _ = codec_kernels.zstd_frames(codecs, src, 0, src.shape[0], dst, 0, 10_000)
    if status == codec_kernels.LZ4_OK:  # a flip zstd cannot see decodes the same in both readers
        return
    assert status == codec_kernels.LZ4_NOT_MINE


def test_without_the_libraries_every_batch_goes_back_to_python():
    none = native_codecs.NO_CODECS
    assert codec_kernels.compress_bound(none, int(compression.ZSTD), 100) == -1
    assert codec_kernels.compress_bound(none, int(compression.LZ4), 100) == -1
    src = np.frombuffer(compression.compress(compression.ZSTD, b"x" * 100), dtype=np.uint8)
    status, _ = codec_kernels.zstd_frames(none, src, 0, src.shape[0], np.zeros(200, np.uint8), 0, 200)
    assert status == codec_kernels.LZ4_NOT_MINE
