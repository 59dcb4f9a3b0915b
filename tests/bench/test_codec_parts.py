"""``bench.codec_parts`` on a tiny zstd partition: it measures every part and leaves the process as it was
(the codec table and the hole framing it swaps for its capture are put back). No timing assertions."""

from __future__ import annotations

from bench import codec_parts
from bench.generate import KiB, Workload, generate
from kafka_log_core.kernels import native_codecs
from kafka_log_core.rules import cleaner, cleaner_segments


def test_codec_parts_measures_a_zstd_shape_and_puts_the_process_back(tmp_path):
    generate(
        tmp_path / "logs", Workload(partition_bytes=768 * KiB, segment_bytes=256 * KiB, codecs=("zstd",))
    )
    table, frame, decode = native_codecs.codecs(), cleaner_segments._frame_holes, cleaner.decode_areas

    result = codec_parts.measure(tmp_path / "logs", repeat=1)

    assert result["total"] > 0 and result["rebuilt_batches"] > 0 and result["rebuilt_bytes"] > 0
    assert {"decode_ahead", "pass1", "pass2", "rest"} <= set(result["parts"])
    assert result["compressor"] > 0
    assert set(result["kafka_like"]) == {"decode_both_passes", "compressor", "total", "ours_decoder_alone"}
    assert native_codecs.codecs() is table and table[native_codecs.C_ZSTD_COMPRESS] != 0
    assert cleaner_segments._frame_holes is frame and cleaner.decode_areas is decode
