"""The Spark jobs and the command line -- the top of the stack.

``cli`` (the ``kafka-log-jobs`` console script), one module per job (``compact``, ``retain``, ``report``,
``export``; each also runs under ``spark-submit jobs/<job>.py``), ``common`` (listing partitions into tasks,
running them on Spark, printing results), presentation (``html_report``, ``progress``) and ``package``
(``make dist``). Jobs import :mod:`kafka_log_core` and :mod:`spark_udfs`; nothing imports the jobs.
"""
