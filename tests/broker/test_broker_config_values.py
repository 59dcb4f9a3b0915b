"""Topic setting values the jobs accept or refuse, judged by Kafka's own ``LogConfig`` (the ``ConfigDef``
validators a broker applies to a topic's configs) from the jars of 4.4.0 and 3.9.1: a one-file Java
program builds a ``LogConfig`` from each value, and our loader reads the same value from a topic file
with that release's rules."""

from __future__ import annotations

import pytest

from kafka_log_core.errors import ConfigError
from kafka_log_core.settings.config import load_config
from kafka_log_core.settings.kafka_version import KafkaVersion
from tests.kafka_harness import KAFKA_3, KAFKA_4, run_java_source

pytestmark = pytest.mark.broker

CHECK = """
import java.util.HashMap;
import java.util.Map;

public class CheckLogConfig {
    public static void main(String[] args) {
        for (String line : args) {
            int eq = line.indexOf('=');
            Map<String, String> props = new HashMap<>();
            props.put(line.substring(0, eq), line.substring(eq + 1));
            try {
                new org.apache.kafka.storage.internals.log.LogConfig(props);
                System.out.println("accepted");
            } catch (org.apache.kafka.common.config.ConfigException e) {
                System.out.println("refused");
            }
        }
    }
}
"""

VALUES = [
    # a list: duplicates are taken once (4.4's ValidList refuses them, but ConfigDef.parse drops them first)
    "cleanup.policy=compact,compact",
    "cleanup.policy=delete , delete",
    "cleanup.policy=delete,compact",
    "cleanup.policy=",
    "cleanup.policy=compact,",
    "cleanup.policy=Compact",
    # each number at and around its bounds (-1, 0, the release's minimum)
    "segment.bytes=14",
    "segment.bytes=13",
    "segment.bytes=1048575",
    "segment.bytes=1048576",
    "segment.ms=0",
    "segment.jitter.ms=-1",
    "segment.index.bytes=3",
    "index.interval.bytes=-1",
    "retention.ms=-1",
    "retention.ms=-2",
    "retention.ms= 5 ",
    "retention.ms=1.5",
    "retention.ms=9223372036854775808",
    "retention.bytes=-5",
    "delete.retention.ms=-1",
    "min.compaction.lag.ms=-1",
    "max.compaction.lag.ms=0",
    "max.compaction.lag.ms=1",
    "min.cleanable.dirty.ratio=0",
    "min.cleanable.dirty.ratio=1",
    "min.cleanable.dirty.ratio=1.01",
    "min.cleanable.dirty.ratio=-1e-9",
    "file.delete.delay.ms=-1",
    "max.message.bytes=-1",
    "max.message.bytes=0",
    "preallocate=yes",
    "preallocate=TRUE",
    "message.timestamp.type=logappendtime",
    "message.timestamp.type=LogAppendTime",
    "compression.type=none",
    "compression.type=uncompressed",
    "compression.type=ZSTD",
]


def _ours(tmp_path, line: str, version: KafkaVersion) -> str:
    conf = tmp_path / "conf"
    (conf / "topics").mkdir(parents=True, exist_ok=True)
    (conf / "topics" / "orders.properties").write_text(line + "\n", encoding="latin-1")
    try:
        load_config(conf, version=version)
    except ConfigError:
        return "refused"
    return "accepted"


@pytest.mark.parametrize(("release", "jars"), [(KAFKA_4, "kafka_jars"), (KAFKA_3, "kafka3_jars")])
def test_topic_values_are_accepted_and_refused_as_kafkas_log_config_does(tmp_path, request, release, jars):
    lib_dir = request.getfixturevalue(jars)
    source = tmp_path / "CheckLogConfig.java"
    source.write_text(CHECK)
    proc = run_java_source(source, *VALUES, lib_dir=lib_dir)
    assert proc.returncode == 0, proc.stderr
    theirs = proc.stdout.split()
    assert len(theirs) == len(VALUES) and "accepted" in theirs and "refused" in theirs
    version = KafkaVersion.parse(release.version)
    ours = [_ours(tmp_path, line, version) for line in VALUES]
    assert dict(zip(VALUES, ours, strict=True)) == dict(zip(VALUES, theirs, strict=True))
