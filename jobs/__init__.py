"""The Spark jobs and the command line -- the top of the stack.

``cli`` (the ``kafka-log-jobs`` console script), one module per job (``compact``, ``retain``, ``report``,
``export``; each also runs under ``spark-submit jobs/<job>.py``), and what they share: ``options`` (the
shared options, each defined once) building a ``context`` (one :class:`~jobs.context.JobContext` per
command: listing, settings, task options, Spark session), ``runner`` (the tasks mapped over the listed
partitions on Spark, the outcomes back, the result rows), ``bins`` (small partitions sharing a Spark task,
the largest first), ``row_store`` (the result rows as the driver keeps them), ``spark`` (Spark's core or a
session), ``output`` (the result table: stdout, ``--report-path``), presentation (``html_report``, ``progress``), ``split`` (split
cleaning's Spark runner) and ``package`` (``make dist``). Jobs import :mod:`kafka_log_core` and
:mod:`spark_udfs`; nothing imports the jobs.
"""
