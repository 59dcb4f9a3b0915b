"""Numbers Kafka's code takes from Java and from its own formats, defined once for the whole core.

Java's ``int`` and ``long`` bounds are where Kafka's offsets, positions, timestamps and config values
stop; the offset map's entry size is what ``log.cleaner.dedupe.buffer.size`` is divided by. Importable by
every module of the core (layer 0).
"""

from __future__ import annotations

MAX_INT = 2**31 - 1  # Java Integer.MAX_VALUE
MIN_INT = -(2**31)  # Java Integer.MIN_VALUE
MAX_LONG = 2**63 - 1  # Java Long.MAX_VALUE
MIN_LONG = -(2**63)  # Java Long.MIN_VALUE

# One entry of the cleaner's offset map (Kafka's SkimpyOffsetMap): a 16-byte key digest (MD5) and an
# 8-byte offset.
OFFSET_MAP_DIGEST_BYTES = 16
OFFSET_MAP_ENTRY_BYTES = OFFSET_MAP_DIGEST_BYTES + 8
