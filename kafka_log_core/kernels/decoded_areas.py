"""Every compressed batch of a segment decoded once, for both passes of the cleaner.

Pass 1 and pass 2 walk the same records of every segment that was wholly dirty; decoding its compressed
batches once, before pass 1, and keeping them for pass 2 halves what the decoders cost. The records of
the i-th compressed v2 batch of the segment are ``areas[bounds[i, 0]:bounds[i, 1]]``: the same
``areas``/``bounds`` the passes already take for a run of compressed batches (``chunk_walk.walk_chunk``
takes every compressed batch's records from them, in order, while there are rows left).

Decoding uses the kernels' own decoders (``codec_kernels.decode_area``) with each batch's limit, so a
batch decodes here exactly when it would decode in the walk. Anything else -- a legacy entry, a codec or
frame the kernels leave to the readable reader, framing that does not parse -- ends the decoding with
``AREAS_NOT_MINE`` and the passes decode the batches from there as they go, which is where such a batch is
handled or refused.

A segment whose first ``PLAIN_LEAD_BATCHES`` batches are all uncompressed is not decoded ahead
(``AREAS_NOT_MINE`` with nothing decoded): walking the headers of a wholly uncompressed segment here cost
a tenth of cleaning it when its batches are small (one record each), for nothing. Compressed batches that
follow such a lead are decoded by each pass as it goes, as every batch was before the store existed.
"""

from __future__ import annotations

from numba import njit

from kafka_log_core.format.compression import CompressionType
from kafka_log_core.format.record_batch import ATTRIBUTES_OFFSET, CODEC_MASK, HEADER_SIZE
from kafka_log_core.kernels.batch_header import RECORDS_COUNT_AT, framing
from kafka_log_core.kernels.codec_kernels import LZ4_NEEDS_ROOM, LZ4_OK, decode_area, decode_limit
from kafka_log_core.kernels.fields import borrowed, read_i32
from kafka_log_core.kernels.statuses import CONTINUE, DONE

AREAS_DONE = 0  # every batch framed, every compressed one decoded
AREAS_ROOM = 1  # ``dst`` or ``bounds`` is full: Python makes it larger and calls again from ``pos``
AREAS_NOT_MINE = 2  # a batch the kernels do not decode: the areas end before it

_ZSTD = int(CompressionType.ZSTD)  # the kernels decode codecs 1..4
PLAIN_LEAD_BATCHES = (
    64  # this many uncompressed batches before any compressed one: the segment is not decoded
)


@njit(cache=True)
def decode_segment(buf, end, pos, n, op, dst, bounds, codecs, max_batch_bytes):
    """Decode the compressed batches of ``buf[pos:end]`` into ``dst`` from ``op``, their bounds into
    ``bounds`` from row ``n``. Returns (AREAS_* status, pos, n, op): where to resume after AREAS_ROOM."""
    buf, dst, bounds, codecs = borrowed(buf), borrowed(dst), borrowed(bounds), borrowed(codecs)
    plain = 0
    while True:
        status, total, magic = framing(buf, pos, end)
        if status == DONE:
            return AREAS_DONE, pos, n, op
        if status != CONTINUE or magic != 2:
            return AREAS_NOT_MINE, pos, n, op
        codec = buf[pos + ATTRIBUTES_OFFSET + 1] & CODEC_MASK
        if codec:
            if codec > _ZSTD:
                return AREAS_NOT_MINE, pos, n, op
            if n == bounds.shape[0]:
                return AREAS_ROOM, pos, n, op
            limit = decode_limit(read_i32(buf, pos + RECORDS_COUNT_AT), max_batch_bytes)
            found, end_op = decode_area(codecs, codec, buf, pos + HEADER_SIZE, pos + total, dst, op, limit)
            if found == LZ4_NEEDS_ROOM:
                return AREAS_ROOM, pos, n, op
            if found != LZ4_OK:
                return AREAS_NOT_MINE, pos, n, op
            bounds[n, 0] = op
            bounds[n, 1] = end_op
            op = end_op
            n += 1
        elif n == 0:
            plain += 1
            if plain == PLAIN_LEAD_BATCHES:
                return AREAS_NOT_MINE, pos, n, op
        pos += total
