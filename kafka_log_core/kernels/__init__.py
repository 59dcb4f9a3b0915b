"""The compiled hot loops (numba), each covering a whole segment or run of batches: record walking, CRC32C,
key hashing, the cleaner's offset map, LZ4 framing, and the segment passes of scanning, mapping, cleaning
and index building. Their output tables have named columns (``R_*`` / field constants), never bare
positions.

May import the root modules and :mod:`kafka_log_core.format` (layouts, codec ids); imported by ``log``,
``rules`` and the tools above them.
"""
