"""Setting values the jobs accept or refuse, judged by Kafka's own classes from the jars of 4.4.0 and 3.9.1:
a one-file Java program builds a topic's ``LogConfig`` from each topic value, or a broker's
``KafkaConfig`` and then its default ``LogConfig`` (what the broker checks at start-up) from each broker
value; our loader reads the same value from a topic file or a broker properties file with that release's
rules."""

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
        boolean broker = args[0].equals("broker");
        for (String line : java.util.Arrays.copyOfRange(args, 1, args.length)) {
            int eq = line.indexOf('=');
            Map<String, String> props = new HashMap<>();
            if (broker) {
                props.put("process.roles", "broker,controller");
                props.put("node.id", "1");
                props.put("controller.quorum.voters", "1@localhost:9093");
                props.put("listeners", "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093");
                props.put("controller.listener.names", "CONTROLLER");
            }
            props.put(line.substring(0, eq), line.substring(eq + 1));
            try {
                if (broker) {
                    new org.apache.kafka.storage.internals.log.LogConfig(
                        new kafka.server.KafkaConfig(props).extractLogConfigMap());
                } else {
                    new org.apache.kafka.storage.internals.log.LogConfig(props);
                }
                System.out.println("accepted");
            } catch (RuntimeException e) {  // ConfigException, and IllegalArgumentException from require(...)
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


BROKER_VALUES = [
    "log.retention.hours=-5",
    "log.retention.minutes=0",
    "log.retention.ms=0",
    "log.retention.ms=-2",
    "log.retention.bytes=-7",
    "log.roll.hours=0",
    "log.roll.ms=0",
    "log.roll.jitter.hours=-1",
    "log.roll.jitter.ms=-1",
    "log.segment.bytes=14",
    "log.segment.bytes=1048575",
    "log.segment.bytes=1048576",
    "log.index.size.max.bytes=3",
    "log.index.interval.bytes=-1",
    "log.cleaner.delete.retention.ms=-1",
    "log.cleaner.min.compaction.lag.ms=-1",
    "log.cleaner.max.compaction.lag.ms=0",
    "log.cleaner.min.cleanable.ratio=1.5",
    "log.segment.delete.delay.ms=-1",
    "message.max.bytes=-1",
    "log.preallocate=maybe",
    "log.message.timestamp.type=Foo",
    "compression.type=none",
    "log.cleanup.policy=compact,compact",
    "log.cleanup.policy=",
    "log.cleaner.enable=maybe",
    "log.cleaner.dedupe.buffer.size=1048576",
    "log.cleaner.dedupe.buffer.size=1048577",
    "log.cleaner.io.buffer.size=-1",
    "log.cleaner.backoff.ms=-1",
    "log.retention.check.interval.ms=0",
    "producer.id.expiration.ms=0",
    "offsets.topic.segment.bytes=0",
    "transaction.state.log.segment.bytes=0",
]


def _ours(tmp_path, line: str, version: KafkaVersion, broker: bool = False) -> str:
    conf = tmp_path / "conf"
    (conf / "topics").mkdir(parents=True, exist_ok=True)
    (conf / "topics" / "orders.properties").write_text("" if broker else line + "\n", encoding="latin-1")
    (conf / "broker.properties").write_text(line + "\n" if broker else "", encoding="latin-1")
    try:
        load_config(conf, version=version)
    except ConfigError:
        return "refused"
    return "accepted"


@pytest.mark.parametrize(("release", "jars"), [(KAFKA_4, "kafka_jars"), (KAFKA_3, "kafka3_jars")])
@pytest.mark.parametrize(("level", "values"), [("topic", VALUES), ("broker", BROKER_VALUES)])
def test_values_are_accepted_and_refused_as_kafkas_own_config_classes_do(
    tmp_path, request, release, jars, level, values
):
    lib_dir = request.getfixturevalue(jars)
    source = tmp_path / "CheckLogConfig.java"
    source.write_text(CHECK)
    proc = run_java_source(source, level, *values, lib_dir=lib_dir)
    assert proc.returncode == 0, proc.stderr
    theirs = proc.stdout.split()
    assert len(theirs) == len(values) and "accepted" in theirs and "refused" in theirs
    version = KafkaVersion.parse(release.version)
    ours = [_ours(tmp_path, line, version, broker=level == "broker") for line in values]
    assert dict(zip(values, ours, strict=True)) == dict(zip(values, theirs, strict=True))
