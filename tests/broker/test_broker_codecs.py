"""The record areas our cleaner rebuilds, compressed to the bytes Kafka's own compressors write.

Kafka's cleaner rebuilds a batch it keeps part of through ``MemoryRecordsBuilder``, whose stream is the
codec's ``wrapForOutput``: zstd is zstd-jni's ``ZstdOutputStream`` under a 16 KiB ``BufferedOutputStream``
(level 3, the size unknown, flushed by ``close`` before the frame ends), lz4 Kafka's
``Lz4BlockOutputStream`` (64 KiB blocks, lz4-java's fast compressor). Kafka 4.4's classes compress record
areas of several sizes here (a one-file Java program on the release's jars); our Python writer
(``compression.compress``) and the compiled path of pass 2 (``codec_kernels.compress_area``) must give the
same bytes. (gzip and snappy are left out: our gzip is libdeflate's, other bytes than the JDK's zlib, and
cramjam's snappy encoder differs from snappy-java's on some inputs; both read the same records.)
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kafka_log_core.format import compression
from kafka_log_core.kernels import codec_kernels, native_codecs
from tests.kafka_harness import run_java_source

pytestmark = pytest.mark.broker

COMPRESS = """
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.internals.ByteBufferOutputStream;

public class KafkaCompress {
    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i += 2) {
            byte[] data = Files.readAllBytes(Paths.get(args[i + 1]));
            Compression compression = Compression.of(CompressionType.forName(args[i])).build();
            ByteBufferOutputStream out = new ByteBufferOutputStream(1024);
            try (OutputStream stream = compression.wrapForOutput(out, RecordBatch.MAGIC_VALUE_V2)) {
                for (int at = 0; at < data.length; at += 100) {  // records arrive a few at a time
                    stream.write(data, at, Math.min(100, data.length - at));
                }
            }
            ByteBuffer written = out.buffer();
            written.flip();
            byte[] bytes = new byte[written.remaining()];
            written.get(bytes);
            Files.write(Paths.get(args[i + 1] + "." + args[i]), bytes);
        }
    }
}
"""
SIZES = (1, 300, 5_000, 20_000, 70_000, 200_000, 600_000)  # one byte to several zstd and lz4 blocks
CODECS = {"zstd": compression.ZSTD, "lz4": compression.LZ4}


def _records(size: int) -> bytes:
    """Record-like bytes: keys repeating, values of varying lengths."""
    rng = random.Random(size)
    out = bytearray()
    i = 0
    while len(out) < size:
        out += f"key-{i % 97}:".encode() + f"value-{i}-".encode() * rng.randint(1, 8)
        i += 1
    return bytes(out[:size])


def _kernel(codec: int, data: bytes) -> bytes:
    codecs = native_codecs.codecs()
    src = np.frombuffer(data, dtype=np.uint8).copy()
    dst = np.zeros(7 + codec_kernels.compress_bound(codecs, codec, len(data)), dtype=np.uint8)
    end = codec_kernels.compress_area(codecs, codec, src, 0, len(data), dst, 7)
    assert end > 7, "the kernel handed the batch back"
    return dst[7:end].tobytes()


def test_zstd_and_lz4_record_areas_compress_to_the_bytes_of_kafkas_compressors(tmp_path, kafka_jars):
    inputs = {size: tmp_path / f"records-{size}" for size in SIZES}
    args = []
    for size, path in inputs.items():
        path.write_bytes(_records(size))
        args += [arg for name in CODECS for arg in (name, str(path))]
    source = tmp_path / "KafkaCompress.java"
    source.write_text(COMPRESS)
    proc = run_java_source(source, *args, lib_dir=kafka_jars)
    assert proc.returncode == 0, proc.stderr
    for size, path in inputs.items():
        data = path.read_bytes()
        for name, codec in CODECS.items():
            kafka = path.with_name(f"{path.name}.{name}").read_bytes()
            assert compression.decompress(codec, kafka) == data
            assert compression.compress(codec, data) == kafka, (name, size)
            assert _kernel(codec, data) == kafka, (name, size)
