"""kafka_log_core: the per-partition library under the jobs -- Kafka's on-disk format and its rules.

Layers, bottom to top; a module may import its own layer and the layers below it, never above
(``tests/test_layout.py`` checks this on every module):

0. ``errors``, ``constants``, ``status``, ``storage``, ``fsutil``, ``javacompat`` -- the project error
   hierarchy, Java's numeric limits and shared sizes, a result row's typed status, the file-access seam
   (every read of a file), fsync'd writes, Java-compatible hashing; importable by everyone.
1. :mod:`kafka_log_core.format` -- bytes on disk: one module per artefact (batches, indexes, checkpoints...).
2. :mod:`kafka_log_core.kernels` -- the compiled (numba) hot loops over those bytes.
3. :mod:`kafka_log_core.log` -- one partition's log: segments, the partition log, the log dir, locks;
   :mod:`kafka_log_core.settings` -- Kafka's configuration, versions and the KRaft metadata log;
   :mod:`kafka_log_core.registry` -- the Schema Registry's schemas (its ``_schemas`` topic) and the
   decoders of the Confluent wire format (Avro, Protobuf, JSON Schema) into Arrow.
4. :mod:`kafka_log_core.rules` -- the broker's rule sets: cleaner, retention, the log loader's recovery,
   producer state.
5. :mod:`kafka_log_core.work` -- the per-partition tasks the jobs map (plan, compact, retain, report) and
   their typed result rows; :mod:`kafka_log_core.tools` -- dump and offsets.
6. Outside the runtime path: :mod:`kafka_log_core.simulator`, a broker-like writer for sample data, tests
   and the benchmark.

Nothing in the core imports the simulator, nor ``jobs``, nor ``pyspark``; entry points, Spark and
presentation live in ``jobs/`` and ``spark_udfs/``. ``tests/test_layout.py``'s ``LAYERS`` holds these
ranks, and ``docs/design.md`` draws them.
"""
