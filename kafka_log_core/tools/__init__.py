"""Read-only tools over files and partitions: ``dump`` (Kafka's kafka-dump-log output) and ``offsets``
(kafka-get-offsets' answer from the indexes). May import any layer below ``work``; the CLI in ``jobs``
presents them.
"""
