"""The compiled hot loops (numba), each covering a whole segment or run of batches, one module per concept:

* building blocks: ``fields`` (byte access), ``crc32c``, ``record_walk`` (varints, the record table),
  ``key_digest`` (MD5 in lanes), ``offset_map`` (the cleaner's map and its probes), ``codec_kernels``
  (LZ4 frames decoded in the kernels);
* layouts and protocol: ``batch_header`` (v2 and legacy header fields, framing), ``statuses`` (how a pass
  talks to Python);
* whole-segment kernels: ``header_scan`` (batch headers, CRC check), ``offset_order`` (the batches' offsets
  in order, checked before a round), ``chunk_walk`` (phase A of every pass: records walked and keys hashed
  a chunk at a time), ``txn_table`` (the transaction tracker),
  ``digest_store`` (digests kept from pass 1), ``map_pass`` (pass 1), ``clean_pass`` (pass 2),
  ``index_entries`` (offset and time index entries), ``digest_rows`` (split cleaning's rows by digest);
* ``scan``: the readable record table of one batch (Python around the walk).

Their output tables have named columns (``R_*`` / field constants), never bare positions.

May import the root modules and :mod:`kafka_log_core.format` (layouts, codec ids); imported by ``log``,
``rules`` and the tools above them.
"""

from kafka_log_core.numba_cache import drop_stale

drop_stale()  # before any kernel is loaded from numba's cache
