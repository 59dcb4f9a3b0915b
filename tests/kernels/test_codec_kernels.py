"""The codecs the compiled passes run themselves (lz4, zstd and gzip through the libraries' C entry
points, ``native_codecs``; snappy in ``snappy_codec``): the same bytes as the readable writer
(``compression.compress``, which calls the libraries through their Python packages) for lz4, zstd and
snappy, the same records for gzip (libdeflate writes other bytes than zlib), records decoded as the
readable reader decodes them, and decompression bounded."""

from __future__ import annotations

import cramjam
import numpy as np
import pytest

from kafka_log_core.errors import CompressionError
from kafka_log_core.format import compression
from kafka_log_core.kernels import codec_kernels, native_codecs, snappy_codec

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
    slots = (native_codecs.C_ZSTD_COMPRESS, native_codecs.C_LZ4_COMPRESS, native_codecs.C_GZIP_COMPRESS)
    if not all(table[slot] for slot in slots):
        pytest.fail(
            "the zstandard, lz4 and deflate wheels must export the codec entry points the kernels call"
        )
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
    with pytest.raises(CompressionError, match="more than 999999 bytes"):
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
    assert codec_kernels.compress_bound(none, int(compression.GZIP), 100) == -1
    src = np.frombuffer(compression.compress(compression.ZSTD, b"x" * 100), dtype=np.uint8)
    status, _ = codec_kernels.zstd_frames(none, src, 0, src.shape[0], np.zeros(200, np.uint8), 0, 200)
    assert status == codec_kernels.LZ4_NOT_MINE


def _lz4_decoded(codecs, frame: bytes, limit: int) -> tuple[int, bytes]:
    src = np.frombuffer(frame, dtype=np.uint8)
    dst = np.zeros(3 + limit + codec_kernels.LZ4_MAX_BLOCK, dtype=np.uint8)
    status, end = codec_kernels.lz4_frame(codecs, src, 0, src.shape[0], dst, 3, limit)
    return status, dst[3:end].tobytes() if status == codec_kernels.LZ4_OK else b""


def _without_lz4_decoder(codecs):
    table = codecs.copy()
    table[native_codecs.C_LZ4_DECOMPRESS] = 0
    return table


@pytest.mark.parametrize("pattern", PATTERNS)
def test_lz4_frames_decoded_by_the_wheels_block_decoder_and_by_ours_equal_the_readable_reader(
    codecs, pattern
):
    assert codecs[native_codecs.C_LZ4_DECOMPRESS], "the lz4 wheel must export LZ4_decompress_safe"
    ours = _without_lz4_decoder(codecs)
    rng = np.random.default_rng(13)
    for n in SIZES:
        data = PATTERNS[pattern](rng, n).tobytes()
        frame = compression.compress(compression.LZ4, data)
        assert _lz4_decoded(codecs, frame, n) == _lz4_decoded(ours, frame, n) == (codec_kernels.LZ4_OK, data)
        assert compression.decompress(compression.LZ4, frame) == data
        if n:  # one byte short of the limit: neither decoder takes it
            assert _lz4_decoded(codecs, frame, n - 1)[0] == codec_kernels.LZ4_NOT_MINE
            assert _lz4_decoded(ours, frame, n - 1)[0] == codec_kernels.LZ4_NOT_MINE


def test_corrupt_lz4_frames_are_taken_as_before_or_as_the_readable_reader_takes_them(codecs):
    ours = _without_lz4_decoder(codecs)
    rng = np.random.default_rng(14)
    data = PATTERNS["repeated text"](rng, 150_000).tobytes() + PATTERNS["few symbols"](rng, 50_000).tobytes()
    frame = compression.compress(compression.LZ4, data)
    differed = 0
    for _ in range(300):
        bad = bytearray(frame)
        for at in rng.integers(7, len(bad), int(rng.integers(1, 4))):
            bad[at] ^= int(rng.integers(1, 256))
        taken, before = _lz4_decoded(codecs, bytes(bad), len(data)), _lz4_decoded(ours, bytes(bad), len(data))
        if (
            taken != before
        ):  # a flip made a match at offset 0: left to the readable reader before, which takes it
            differed += 1
            assert taken[0] == codec_kernels.LZ4_OK and before[0] == codec_kernels.LZ4_NOT_MINE
            assert len(compression.decompress(compression.LZ4, bytes(bad), limit=len(data))) == len(taken[1])
    assert differed < 3


def test_an_lz4_match_at_offset_zero_is_taken_by_the_wheels_decoder_as_the_readable_reader_takes_it(codecs):
    # literals, a match 0 bytes back (no LZ4 writer makes one), the last literals: ours refuses it, the
    # wheel's LZ4_decompress_safe takes it, as lz4.block.decompress in the readable reader does
    block = bytes([0x80]) + b"ABCDEFGH" + bytes([0, 0]) + bytes([0x50]) + b"12345"
    frame = compression.lz4_frame_header(2) + len(block).to_bytes(4, "little") + block + bytes(4)
    assert _lz4_decoded(_without_lz4_decoder(codecs), frame, 100)[0] == codec_kernels.LZ4_NOT_MINE
    status, decoded = _lz4_decoded(codecs, frame, 100)
    assert status == codec_kernels.LZ4_OK and len(decoded) == 17
    assert len(compression.decompress(compression.LZ4, frame)) == 17


@pytest.mark.parametrize("pattern", PATTERNS)
def test_snappy_written_in_the_kernel_is_the_bytes_cramjam_and_the_readable_writer_write(codecs, pattern):
    rng = np.random.default_rng(11)
    for n in [*SIZES, 15, 16, 17, 18, 32_767, 32_768, 32_769]:
        data = np.ascontiguousarray(PATTERNS[pattern](rng, n))
        written = _compressed_by_kernel(codecs, int(compression.SNAPPY), data)
        assert written == compression.compress(compression.SNAPPY, data.tobytes()), n
        table = np.zeros(1 << 14, dtype=np.uint16)
        raw = np.zeros(32 + n + n // 6, dtype=np.uint8)
        end = snappy_codec.snappy_raw(data, 0, n, raw, 0, table)
        assert raw[:end].tobytes() == bytes(cramjam.snappy.compress_raw(data.tobytes())), n


@pytest.mark.parametrize("pattern", PATTERNS)
def test_snappy_decoded_in_the_kernel_equals_the_readable_reader(pattern):
    rng = np.random.default_rng(12)
    for n in SIZES:
        data = PATTERNS[pattern](rng, n).tobytes()
        for stream in (
            compression.compress(compression.SNAPPY, data),
            bytes(cramjam.snappy.compress_raw(data)),
        ):
            src = np.frombuffer(stream, dtype=np.uint8)
            dst = np.zeros(n + 3, dtype=np.uint8)
            status, end = codec_kernels.snappy_stream(src, 0, src.shape[0], dst, 3, n)
            assert status == codec_kernels.LZ4_OK
            assert dst[3:end].tobytes() == data == compression.decompress(compression.SNAPPY, stream)


def test_snappy_past_the_limit_the_buffer_or_its_bytes_is_not_decoded():
    data = bytes(100_000)
    stream = np.frombuffer(compression.compress(compression.SNAPPY, data), dtype=np.uint8)
    status, _ = codec_kernels.snappy_stream(
        stream, 0, stream.shape[0], np.zeros(50_000, np.uint8), 0, len(data)
    )
    assert status == codec_kernels.LZ4_NEEDS_ROOM
    large = np.zeros(200_000, dtype=np.uint8)
    status, _ = codec_kernels.snappy_stream(stream, 0, stream.shape[0], large, 0, len(data) - 1)
    assert status == codec_kernels.LZ4_NOT_MINE
    for cut in (5, 17, 20, stream.shape[0] - 1):  # a torn stream: the readable reader names what is wrong
        status, _ = codec_kernels.snappy_stream(stream, 0, cut, large, 0, len(data))
        assert status == codec_kernels.LZ4_NOT_MINE
        with pytest.raises(CompressionError):
            compression.decompress(compression.SNAPPY, stream[:cut].tobytes())


def test_gzip_written_in_the_kernel_holds_the_same_records_and_its_members_decode_as_zlib_decodes(codecs):
    rng = np.random.default_rng(13)
    for n in SIZES:
        data = np.ascontiguousarray(PATTERNS["few symbols"](rng, n))
        written = _compressed_by_kernel(codecs, int(compression.GZIP), data)  # libdeflate: not zlib's bytes
        assert compression.decompress(compression.GZIP, written) == data.tobytes(), n
        members = np.frombuffer(
            compression.compress(compression.GZIP, data.tobytes()) + written, dtype=np.uint8
        )
        dst = np.zeros(2 * n + 1, dtype=np.uint8)
        status, end = codec_kernels.gzip_members(codecs, members, 0, members.shape[0], dst, 1, 2 * n)
        assert status == codec_kernels.LZ4_OK
        assert dst[1:end].tobytes() == 2 * data.tobytes()


def test_gzip_past_the_limit_the_buffer_or_its_bytes_is_not_decoded(codecs):
    data = bytes(100_000)
    member = np.frombuffer(compression.compress(compression.GZIP, data), dtype=np.uint8)
    status, _ = codec_kernels.gzip_members(
        codecs, member, 0, member.shape[0], np.zeros(50_000, np.uint8), 0, len(data)
    )
    assert status == codec_kernels.LZ4_NEEDS_ROOM
    large = np.zeros(200_000, dtype=np.uint8)
    status, _ = codec_kernels.gzip_members(codecs, member, 0, member.shape[0], large, 0, len(data) - 1)
    assert status == codec_kernels.LZ4_NOT_MINE
    status, _ = codec_kernels.gzip_members(codecs, member, 0, member.shape[0] - 1, large, 0, len(data))
    assert status == codec_kernels.LZ4_NOT_MINE  # a torn member: the readable reader names the error
    with pytest.raises(CompressionError):
        compression.decompress(compression.GZIP, member[:-1].tobytes())
