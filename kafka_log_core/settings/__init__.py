"""What decides how a partition is treated: Kafka's configuration (broker defaults, ``conf/`` files, topic
overrides, ``--set``) with Kafka's names and defaults, the Kafka version a log dir was written by, and the
topic configs read from a KRaft metadata log.

May import the root modules and ``format``; imported by ``rules``, ``work`` and the jobs.
"""
