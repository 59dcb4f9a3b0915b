"""A broker simulator for sample data, tests and the benchmark -- NOT part of the jobs' runtime path.

:mod:`~kafka_log_core.simulator.writer` appends batches as a broker does (segments, indexes, producer
snapshots, transactions) with the rules' own producer-state machine and LogConfig's defaults;
:mod:`~kafka_log_core.simulator.sample` (``python -m kafka_log_core.simulator.sample``) writes the sample
log dir of ``make run``.

May import the whole core. Nothing in the core imports it, and no job imports it at run time (only
``jobs/package.py`` warms the packed environment with a sample); ``tests/test_layout.py`` checks both.
"""
