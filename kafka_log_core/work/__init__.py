"""The per-partition work the Spark jobs distribute: the task and options a job sends to an executor, the
one planning step per partition (configs, guards, leftovers, recovery) that compact, retain and report
share, the typed result rows (frozen dataclasses) from which the jobs derive their Spark and Arrow
schemas, and what a task gives back (``outcome``: a ``Status`` and a ``TaskOutcome``, the row and what the
driver does next).

May import every core layer below it; imported by ``jobs`` (and ``spark_udfs`` where it needs to).
"""
