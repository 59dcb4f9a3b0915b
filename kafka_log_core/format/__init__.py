"""Bytes on disk: one module per Kafka file format -- record batches (v2 and legacy), varints,
compression codecs, the ``.log`` file walk, the offset/time indexes (on one fixed-width index base), the
transaction index, checkpoints, producer snapshots, KRaft metadata records, file names, Kafka's message
encoding in record values (``kafka_message``) and Java ``.properties`` text (``properties``). Each
constant of the format is defined once here; the kernels import them.

Each module shows its byte layout in its docstring and has frozen entries with ``read_*`` / ``parse_*`` /
``encode_*`` / ``write_*`` functions. May import only the root modules (``errors``, ``constants``,
``fsutil``, ``javacompat``) and other ``format`` modules; everything else in the core may import it.
"""
