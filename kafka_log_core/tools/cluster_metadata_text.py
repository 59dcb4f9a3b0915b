"""The records of the KRaft metadata log (``__cluster_metadata-0`` segments and ``.checkpoint`` snapshots)
as kafka-dump-log's ``--cluster-metadata-decoder`` prints them (Kafka 4.4's ``DumpLogSegments``).

A data record's value is read by :func:`~kafka_log_core.format.metadata_records.read_message` (the
reader the config replay uses) and printed as a payload, never with a key::

    {"type":"<MetadataRecordType name>","version":<version>,"data":{<fields as Kafka's JSON converters write them>}}

A value Kafka's serde refuses is printed ``Error at <offset>, skipping. <what the serde says>``, and a null
value as the serde finds it (nothing to read its frame version from). Control records (leader changes,
snapshot headers and footers, KRaft versions and voters) are printed by the dump's record metadata as
without the option.
"""

from __future__ import annotations

from kafka_log_core.format.message_schema import as_json
from kafka_log_core.format.metadata_records import MetadataParseError, read_message
from kafka_log_core.tools.json_text import to_json

CLUSTER_METADATA = "cluster-metadata"
NULL_VALUE_TEXT = "Error while reading frame version"


def payload(offset: int, value: bytes | None) -> str:
    """The ``payload:`` text of the metadata record at ``offset``."""
    if value is None:
        return f"Error at {offset}, skipping. {NULL_VALUE_TEXT}"
    try:
        message = read_message(value)
    except MetadataParseError as err:
        return f"Error at {offset}, skipping. {err.kafka_text}"
    kind = message.type
    data = as_json(kind.schema.fields, message.values, message.version)
    return to_json({"type": kind.name, "version": message.version, "data": data})
