"""Typed keys and values from the schemas of a Confluent Schema Registry, offline.

A producer that uses a Schema Registry writes the Confluent wire format (:mod:`.wire`: byte 0, the schema
id as a 4-byte big-endian int, for Protobuf the message indexes, then the payload), and the registry keeps
every schema in its own compacted topic, ``_schemas``, in the same log dirs. This package:

* :mod:`.storage` replays the records of that topic as the registry does when it starts (or reads the
  JSON of the registry's REST answers from a file) into a :class:`~.storage.SchemaStore`;
* :mod:`.avro`, :mod:`.protobuf`, :mod:`.json_schema`: one module per schema format, each with the Arrow
  type of a schema and a decoder that reads a payload written with one schema as the table's (the
  subject's latest) schema, by that format's evolution rules;
* :mod:`.decoding`: what decodes one topic's keys or values (:class:`~.decoding.SideDecoder`), built on
  the driver and shipped to the executors.

Records that cannot be decoded raise :class:`~kafka_log_core.errors.UndecodableError` with the reason;
the export puts them in its side table. May import the root modules and ``format``; imported by
``spark_udfs`` and the jobs.
"""
