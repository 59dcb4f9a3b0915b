"""A real Apache Kafka broker for the `broker` tests, plus a real client (confluent-kafka) to drive it.

Loaded as a pytest plugin by ``tests/conftest.py``. What it gives the tests:

* ``resolve_kafka_jars()`` / fixture ``kafka_jars``: the broker's runtime classpath, copied by Maven from
  ``tests/broker/pom.xml`` into ``tests/broker/target/lib`` once, then reused while the pom is unchanged.
* ``KafkaBroker``: one KRaft node in combined mode (``process.roles=broker,controller``, ``node.id=1``)
  listening on 127.0.0.1, with ``format()``, ``start()``, ``stop()`` (SIGTERM, so the broker writes
  ``.kafka_cleanshutdown``), ``kill()``, ``restart()`` on the same log dir, and ``bootstrap``.
  Fixture ``kafka_broker`` is a factory: ``make_broker(log_dir=None, server_props=None, **more_props)``.
* ``run_dump_log_segments()``: Kafka's own segment dumper, from the same jars.
* Workload helpers over confluent-kafka: ``create_topic``, ``produce``, ``produce_transactions``,
  ``consume_all``, ``earliest_offsets`` / ``latest_offsets``; ``wait_for_broker_cleaning`` polls the
  broker's ``cleaner-offset-checkpoint``.

Main classes (Kafka 4.x): the broker is ``kafka.Kafka``; the storage formatter is still
``kafka.tools.StorageTool`` in core; the segment dumper moved out of core into the tools module as
``org.apache.kafka.tools.DumpLogSegments`` (artifact ``kafka-tools``), so ``kafka.tools.DumpLogSegments``
no longer exists. ``kafka-configs`` is ``kafka.admin.ConfigCommand`` (core) in 3.x and up to 4.3; 4.4 moved
it to the tools module as ``org.apache.kafka.tools.ConfigCommand``.

Two Kafka releases
------------------
``KAFKA_4`` (``tests/broker/pom.xml``, the latest 4.x) is the default everywhere. ``KAFKA_3``
(``tests/broker/pom-3.9.xml``, a 3.9 release, jars in ``tests/broker/target/lib-3.9``) runs the same way
with ``KafkaBroker(..., release=KAFKA_3)`` and fixture ``kafka3_jars``; its tools are all in core
(``kafka.tools.DumpLogSegments``) and it logs through log4j 1 (reload4j), so the harness writes a
``log4j.properties`` for it. Kafka 3.x accepts small ``segment.bytes`` (at least 14 bytes) directly.
``KAFKA_3_9_2`` is the same pom with ``-Dkafka.version=3.9.2`` (jars in ``tests/broker/target/lib-3.9.2``,
fixture ``kafka392_jars``): the cleaner of 3.9.2 and 4.0 to 4.3, for a rule 4.4 changed.

Configs the clients cannot set: confluent-kafka and kafka-python refuse the cluster-wide broker resource
(name ""), so ``run_kafka_configs`` runs Kafka's own ``kafka-configs`` (ConfigCommand) from the jars;
``describe_topic_configs`` is AdminClient.describe_configs, what ``kafka-configs --describe --all`` prints.

Small segments in Kafka 4.x
---------------------------
Since 4.0 ``segment.bytes`` (topic) and ``log.segment.bytes`` (broker) must be at least 1 MiB; smaller
values are rejected (CreateTopics fails with INVALID_CONFIG; with ``log.segment.bytes`` even the storage
format step fails). For tests
Kafka keeps an *internal* topic config, ``internal.segment.bytes``: it is not listed in the docs, has no
lower bound, is accepted by CreateTopics / IncrementalAlterConfigs, and when set it replaces
``segment.bytes`` as the roll size. There is no broker-level ``log.internal.segment.bytes``, so set it per
topic (``SMALL_SEGMENT_CONFIG``). One rule comes with it: a produced batch larger than the segment size is
refused with RECORD_LIST_TOO_LARGE ("Message batch larger than configured server segment size"), so keep
the producer's ``batch_size`` (uncompressed bytes per batch) well below it; ``produce()`` defaults to
``SMALL_BATCH_BYTES``. Rolling by time also works (``segment.ms``, minimum 1), but a time roll only
happens on the next append after the deadline, so the segment count depends on timing; use it only
when a test needs the active segment to roll (e.g. before the broker's cleaner may touch it).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

BROKER_DIR = Path(__file__).resolve().parent / "broker"
POM = BROKER_DIR / "pom.xml"
LIB_DIR = BROKER_DIR / "target" / "lib"


def _pom_property(name: str, pom: Path = POM) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = ET.parse(pom).getroot().find(f"m:properties/m:{name}", ns)
    if node is None or not (node.text or "").strip():
        raise RuntimeError(f"{pom}: property <{name}> is missing")
    return node.text.strip()


@dataclass(frozen=True)
class KafkaRelease:
    """One Kafka release the tests run: where Maven copies its jars, and its main classes."""

    pom: Path
    lib_dir: Path
    dump_log_segments_main: str
    log4j2: bool  # log4j 2 (Kafka 4.x) or log4j 1 / reload4j (Kafka 3.x)
    broker_main: str = "kafka.Kafka"
    storage_tool_main: str = "kafka.tools.StorageTool"
    config_command_main: str = "kafka.admin.ConfigCommand"  # in core up to 4.3
    pinned: str | None = None  # a release other than the pom's <kafka.version> (-Dkafka.version for Maven)

    @property
    def version(self) -> str:
        """The pin itself is ``<kafka.version>`` in the pom (Maven needs it there), unless ``pinned``."""
        return self.pinned or _pom_property("kafka.version", self.pom)


KAFKA_4 = KafkaRelease(
    POM, LIB_DIR, "org.apache.kafka.tools.DumpLogSegments", True,
    config_command_main="org.apache.kafka.tools.ConfigCommand",
)  # fmt: skip
KAFKA_3 = KafkaRelease(
    BROKER_DIR / "pom-3.9.xml", BROKER_DIR / "target" / "lib-3.9", "kafka.tools.DumpLogSegments", False
)
#: 3.9.2, the 3.9 release with KAFKA-17076 (rule R2.2 on the round's bound, as 4.0 to 4.3): the reference
#: for that rule since the 4.x pin has 4.4's (KAFKA-20452). Same pom as KAFKA_3, another kafka.version.
KAFKA_3_9_2 = replace(KAFKA_3, lib_dir=BROKER_DIR / "target" / "lib-3.9.2", pinned="3.9.2")

#: The Kafka release the broker tests run against. The pin itself is ``<kafka.version>`` in
#: tests/broker/pom.xml (Maven needs it there); this is that value, not a second copy.
KAFKA_VERSION = KAFKA_4.version

BROKER_MAIN = KAFKA_4.broker_main
STORAGE_TOOL_MAIN = KAFKA_4.storage_tool_main
DUMP_LOG_SEGMENTS_MAIN = KAFKA_4.dump_log_segments_main


def release_of(lib_dir: Path) -> KafkaRelease:
    """The release whose jars are in ``lib_dir`` (KAFKA_4 for any directory not a 3.x release's)."""
    return next((r for r in (KAFKA_3, KAFKA_3_9_2) if Path(lib_dir) == r.lib_dir), KAFKA_4)


COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Topic config for segments of a few KiB (see the module docstring).
SMALL_SEGMENT_BYTES = 4096
SMALL_SEGMENT_CONFIG = {"internal.segment.bytes": str(SMALL_SEGMENT_BYTES)}
#: Producer batch limit that fits in a SMALL_SEGMENT_BYTES segment even when compression does not help.
SMALL_BATCH_BYTES = 1024

BROKER_HEAP = "-Xmx512m"
_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Djava.awt.headless=true")
_STAMP_NAME = ".complete"
#: One Maven at a time fills the local repository (~/.m2) that every pom here and every worktree shares, so
#: two pytest processes (``make test`` runs two) never download the same artifact at once.
RESOLVE_LOCK = Path.home() / ".m2" / "kafka-log-jobs-resolve.lock"
#: Exit codes of a broker JVM that shut down through its hooks: 143 = 128 + SIGTERM, after a clean stop.
CLEAN_EXIT_CODES = (0, 143)

# Broker settings for a single node on a test machine. Everything here can be overridden per broker.
DEFAULT_SERVER_PROPS: dict[str, str] = {
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # 50 partitions by default, all created and loaded before the first init_transactions() returns.
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # The retention / checkpoint tasks otherwise start 30 s after boot (internal broker config).
    "log.initial.task.delay.ms": "0",
    # 128 MiB by default, allocated when the cleaner starts; 16 MiB still maps ~600k keys (24 bytes each).
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}


class BrokerHarnessError(RuntimeError):
    """The test broker or a tool run from its jars did not do what the harness asked."""


# --------------------------------------------------------------------------------------------------
# The broker's classpath
# --------------------------------------------------------------------------------------------------


def _pom_digest(pom: Path = POM, pinned: str | None = None) -> str:
    data = pom.read_bytes() + (b"" if pinned is None else f"\nkafka.version={pinned}".encode())
    return hashlib.sha256(data).hexdigest()


def _jars_complete(lib_dir: Path, digest: str) -> bool:
    stamp = lib_dir / _STAMP_NAME
    if not stamp.is_file():
        return False
    lines = stamp.read_text().splitlines()
    if not lines or lines[0] != f"pom-sha256 {digest}":
        return False
    return len(lines) > 1 and all((lib_dir / jar).is_file() for jar in lines[1:])


def resolve_kafka_jars(
    lib_dir: Path | None = None, *, release: KafkaRelease = KAFKA_4, timeout: float = 900.0
) -> Path:
    """Copy the runtime jars of ``release`` into ``lib_dir`` (default: the release's) with Maven, unless
    they are already there (:func:`resolve_jars`)."""
    return resolve_jars(
        release.pom, release.lib_dir if lib_dir is None else lib_dir, expected="kafka_2.13-",
        what=f"Kafka {release.version}", pinned=None if release.pinned is None else ("kafka.version", release.pinned),
        timeout=timeout,
    )  # fmt: skip


def resolve_jars(
    pom: Path, lib_dir: Path, *, expected: str, what: str, pinned: tuple[str, str] | None = None,
    timeout: float = 900.0,
) -> Path:  # fmt: skip
    """Copy the runtime jars of ``pom`` into ``lib_dir`` with Maven, unless they are already there (a jar
    named ``expected``... among them); ``pinned``: a property given to Maven (-Dname=value).

    The stamp file in ``lib_dir`` records the pom's SHA-256 and the jar names; a changed pom or a missing
    jar triggers a fresh copy. Downloads are cached in ~/.m2. Safe to call from parallel sessions: one
    resolution at a time (:data:`RESOLVE_LOCK`).
    """
    digest = _pom_digest(pom, None if pinned is None else pinned[1])
    if _jars_complete(lib_dir, digest):
        return lib_dir
    lib_dir.parent.mkdir(parents=True, exist_ok=True)
    RESOLVE_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(RESOLVE_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _jars_complete(lib_dir, digest):
            return lib_dir
        staging = lib_dir.with_name(lib_dir.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            *([] if pinned is None else [f"-D{pinned[0]}={pinned[1]}"]),
        ]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        jars = sorted(p.name for p in staging.glob("*.jar")) if staging.is_dir() else []
        if proc.returncode != 0 or not any(j.startswith(expected) for j in jars):
            raise BrokerHarnessError(
                f"resolving {what} jars from {pom} failed (exit {proc.returncode}):\n"
                f"{_tail(proc.stdout + proc.stderr, 40)}"
            )
        (staging / _STAMP_NAME).write_text("\n".join([f"pom-sha256 {digest}", *jars]) + "\n")
        shutil.rmtree(lib_dir, ignore_errors=True)
        staging.rename(lib_dir)
        print(f"[kafka-harness] resolved {len(jars)} jars for {what} in {time.monotonic() - started:.1f}s")
    return lib_dir


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _java(lib_dir: Path, main: str, *args: str, heap: str = "-Xmx256m", log4j_config: Path) -> list[str]:
    log4j = (
        f"-Dlog4j2.configurationFile={log4j_config}"
        if release_of(lib_dir).log4j2
        else f"-Dlog4j.configuration=file:{log4j_config}"
    )
    return [
        "java",
        heap,
        *_JVM_FLAGS,
        log4j,
        "-cp",
        str(lib_dir / "*"),
        main,
        *args,
    ]


def _tools_log4j_config(lib_dir: Path) -> Path:
    """Command-line tools log warnings to stderr, so their stdout is only their own output."""
    if not release_of(lib_dir).log4j2:
        path = lib_dir.parent / f"tools-log4j-{lib_dir.name}.properties"
        if not path.exists():
            path.write_text(
                "log4j.rootLogger=WARN, err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.err.Target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.err.layout.ConversionPattern=%p %m (%c)%n\n"
            )
        return path
    path = lib_dir.parent / "tools-log4j2.properties"
    if not path.exists():
        path.write_text(
            "appender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\n"
            "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = err\n"
        )
    return path


def run_dump_log_segments(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *args: str,
    lib_dir: Path = LIB_DIR,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's DumpLogSegments on ``files`` (one path or several) with extra ``args``.

    E.g. ``run_dump_log_segments(seg, "--deep-iteration")``, ``"--print-data-log"``,
    ``"--verify-index-only"``, ``"--index-sanity-check"``. Returns the finished process (text mode);
    the caller checks ``returncode``. ``--files`` is added here.
    """
    paths = [files] if isinstance(files, str | os.PathLike) else list(files)
    joined = ",".join(str(p) for p in paths)
    main = release_of(lib_dir).dump_log_segments_main
    cmd = _java(lib_dir, main, *args, "--files", joined, log4j_config=_tools_log4j_config(lib_dir))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_kafka_configs(
    bootstrap: str, *args: str, lib_dir: Path = LIB_DIR, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's own ``kafka-configs`` against ``bootstrap`` (e.g. ``"--entity-type", "brokers",
    "--entity-default", "--alter", "--add-config", "log.retention.ms=1000"``); raises on a failure."""
    main = release_of(lib_dir).config_command_main
    cmd = _java(
        lib_dir, main, "--bootstrap-server", bootstrap, *args, log4j_config=_tools_log4j_config(lib_dir)
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BrokerHarnessError(
            f"kafka-configs {' '.join(args)} failed (exit {proc.returncode}):\n{_tail(proc.stdout + proc.stderr, 20)}"
        )
    return proc


def run_java_source(
    source: Path, *args: str, lib_dir: Path = LIB_DIR, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run the one-file Java program ``source`` (the launcher compiles it) with a release's jars on the
    class path: Kafka's own classes judge what a test asks (``LogConfig``'s validators, say)."""
    cmd = _java(lib_dir, str(source), *args, log4j_config=_tools_log4j_config(lib_dir))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_get_offsets(
    bootstrap: str, *args: str, lib_dir: Path = LIB_DIR, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run Kafka's own ``kafka-get-offsets`` (``GetOffsetShell``) against ``bootstrap`` with ``args``
    (e.g. ``"--topic", "t", "--time", "-3"``); the caller checks ``returncode`` and reads ``stdout``."""
    cmd = _java(
        lib_dir, "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap, *args,
        log4j_config=_tools_log4j_config(lib_dir),
    )  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


# --------------------------------------------------------------------------------------------------
# The broker process
# --------------------------------------------------------------------------------------------------

_START_TIMES: list[tuple[str, float]] = []
_LIVE_BROKERS: set[KafkaBroker] = set()


def _worker_share() -> tuple[int, int]:
    """(this pytest-xdist worker's index, the number of workers); (0, 1) in a single process."""
    worker, count = (
        os.environ.get("PYTEST_XDIST_WORKER", ""),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"),
    )
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return index, max(int(count) if count.isdigit() else 1, 1)


def _free_ports(count: int) -> list[int]:
    """``count`` ports free now, each ``index`` modulo the number of pytest-xdist workers: two workers never
    pick the same port for their brokers in the moment between this check and the broker's bind. Every
    socket stays bound until the end (the kernel may offer a port just closed again), so each bind is a new
    port and about ``count * workers`` binds are enough."""
    index, workers = _worker_share()
    socks: list[socket.socket] = []
    try:
        ports: list[int] = []
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port % workers == index:
                ports.append(port)
        return ports
    finally:
        for s in socks:
            s.close()


PORT_ATTEMPTS = 3
_ADDRESS_IN_USE = "Address already in use"


def _ports_free(*ports: int) -> bool:
    """Whether each port can be bound on 127.0.0.1 now."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _port_answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid: never starting with '-' (the tools would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One Kafka node in KRaft combined mode on 127.0.0.1, data in ``log_dir``, everything else in ``work_dir``.

    ``work_dir`` holds server.properties, the log4j2 config, ``broker.log`` (the broker's own log) and
    ``broker.out`` (JVM stdout/stderr). Ports are picked once, so ``restart()`` keeps ``bootstrap``.
    ``server_props`` override ``DEFAULT_SERVER_PROPS`` and may set any broker config except the node
    identity, listeners and ``log.dirs``.
    """

    def __init__(
        self,
        log_dir: Path,
        work_dir: Path,
        server_props: Mapping[str, object] | None = None,
        *,
        lib_dir: Path | None = None,
        release: KafkaRelease | None = None,
        port: int | None = None,
        controller_port: int | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.work_dir = Path(work_dir)
        self.release = release or (release_of(lib_dir) if lib_dir is not None else KAFKA_4)
        self.lib_dir = lib_dir if lib_dir is not None else self.release.lib_dir
        free = _free_ports(2)
        self.port = port if port is not None else free[0]
        self.controller_port = controller_port if controller_port is not None else free[1]
        self._ports_chosen = port is None and controller_port is None
        if self.port == self.controller_port:
            raise BrokerHarnessError(f"broker and controller ports are both {self.port}")
        self.server_props = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (server_props or {}).items()
        }
        self.start_seconds: list[float] = []
        self._proc: subprocess.Popen[bytes] | None = None

    # -- paths and addresses -------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "broker.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "server.properties"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        parts = []
        for path in (self.log_path, self.work_dir / "broker.out"):
            if path.is_file():
                parts.append(
                    f"--- {path} (last {lines} lines) ---\n{_tail(path.read_text(errors='replace'), lines)}"
                )
        return "\n".join(parts) or f"(no broker log in {self.work_dir})"

    # -- configuration -------------------------------------------------------------------------------
    def _properties(self) -> dict[str, str]:
        fixed = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
        }
        clash = sorted(set(fixed) & set(self.server_props))
        if clash:
            raise BrokerHarnessError(f"the harness owns these broker settings, do not pass them: {clash}")
        return {**DEFAULT_SERVER_PROPS, **self.server_props, **fixed}

    def _write_config(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in sorted(self._properties().items())))
        if not self.release.log4j2:
            log4j = self.work_dir / "log4j.properties"
            log4j.write_text(
                "log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
                f"log4j.appender.file.File={self.log_path}\n"
                "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            )
            return log4j
        log4j = self.work_dir / "log4j2.properties"
        log4j.write_text(
            "appender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {self.log_path}\n"
            "appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = file\n"
        )
        return log4j

    # -- lifecycle -----------------------------------------------------------------------------------
    def format(self, timeout: float = 120.0) -> None:
        """Format ``log_dir`` for KRaft (meta.properties + bootstrap metadata). No-op if already formatted."""
        if (self.log_dir / "meta.properties").exists():
            return
        log4j = self._write_config()
        args = ("format", "--cluster-id", _random_cluster_id(), "--config", str(self.properties_path))
        cmd = _java(self.lib_dir, self.release.storage_tool_main, *args, log4j_config=log4j)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise BrokerHarnessError(
                f"formatting {self.log_dir} failed (exit {proc.returncode}):\n{_tail(proc.stdout + proc.stderr, 40)}"
            )

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        """Format if needed, start the JVM and wait until the broker answers a metadata request. Ports the
        harness chose are chosen again before a first start that finds one taken, and after a first start
        that could not bind (another process, e.g. a client connection's ephemeral port, took it since)."""
        may_move = self._ports_chosen and not self.start_seconds
        if may_move and not _ports_free(self.port, self.controller_port):
            self.port, self.controller_port = _free_ports(2)
        attempts = 1
        while True:
            try:
                return self._start(timeout)
            except BrokerHarnessError as e:
                if not may_move or _ADDRESS_IN_USE not in str(e) or attempts == PORT_ATTEMPTS:
                    raise
            attempts += 1
            self.port, self.controller_port = _free_ports(2)

    def _start(self, timeout: float) -> KafkaBroker:
        if self.running:
            raise BrokerHarnessError(f"broker on {self.bootstrap} is already running")
        started = time.monotonic()
        self.format()
        formatted = time.monotonic()
        log4j = self._write_config()
        cmd = _java(
            self.lib_dir,
            self.release.broker_main,
            str(self.properties_path),
            heap=BROKER_HEAP,
            log4j_config=log4j,
        )
        with open(self.work_dir / "broker.out", "ab") as out:
            self._proc = subprocess.Popen(
                cmd, cwd=self.work_dir, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        _LIVE_BROKERS.add(self)
        try:
            self._wait_ready(started + timeout)
        except BaseException:
            self.kill()
            raise
        took = time.monotonic() - started
        self.start_seconds.append(took)
        _START_TIMES.append((self.release.version, took))
        print(
            f"[kafka-harness] Kafka {self.release.version} broker on {self.bootstrap} started in {took:.1f}s "
            f"(format {formatted - started:.1f}s; log dir {self.log_dir})"
        )
        return self

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = None
        while True:
            code = self._proc.poll() if self._proc else None
            if code is not None:
                raise BrokerHarnessError(
                    f"Kafka broker exited with code {code} while starting\n{self.log_tail()}"
                )
            if _port_answers(self.port):
                admin = admin or AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
                with contextlib.suppress(Exception):
                    if self._serving(admin.list_topics(timeout=2)):
                        return
            if time.monotonic() > deadline:
                raise BrokerHarnessError(
                    f"Kafka broker on {self.bootstrap} not ready in time\n{self.log_tail()}"
                )
            time.sleep(0.1)

    @staticmethod
    def _serving(metadata) -> bool:
        """Registered, and (after a restart) leading every partition it already has."""
        if 1 not in metadata.brokers:
            return False
        return all(
            t.error is None and all(p.leader == 1 for p in t.partitions.values())
            for t in metadata.topics.values()
        )

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait for a clean shutdown (``.kafka_cleanshutdown`` in each log dir); SIGKILL after
        ``timeout``. Returns the JVM's exit code, one of CLEAN_EXIT_CODES normally (None if it was not
        running)."""
        proc, self._proc = self._proc, None
        _LIVE_BROKERS.discard(self)
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            raise BrokerHarnessError(
                f"Kafka broker on {self.bootstrap} ignored SIGTERM for {timeout:.0f}s and was killed\n{self.log_tail()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL: an unclean shutdown (no ``.kafka_cleanshutdown``), for recovery tests."""
        proc, self._proc = self._proc, None
        _LIVE_BROKERS.discard(self)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)

    def restart(self, timeout: float = 90.0) -> KafkaBroker:
        """Clean stop, then start again on the same log dir and ports."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> KafkaBroker:
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"KafkaBroker({self.bootstrap}, log_dir={str(self.log_dir)!r}, {state})"


@atexit.register
def _kill_leftover_brokers() -> None:
    for broker in list(_LIVE_BROKERS):
        broker.kill()


# --------------------------------------------------------------------------------------------------
# Workload: a real client (confluent-kafka / librdkafka)
# --------------------------------------------------------------------------------------------------

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class SentRecord:
    """One record to produce. ``timestamp_ms=None`` lets the producer stamp it; ``partition=None`` lets
    the partitioner choose."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_ms: int | None = None
    partition: int | None = None


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where the broker put a produced record."""

    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    timestamp_type: str  # "CreateTime" | "LogAppendTime" | "NoTimestampType"


@dataclass(frozen=True, slots=True)
class Transaction:
    """Records written in one transaction, then committed (``commit=True``) or aborted."""

    records: Sequence[SentRecord | tuple]
    commit: bool = True


RecordLike = SentRecord | tuple
_TIMESTAMP_TYPES = {0: "NoTimestampType", 1: "CreateTime", 2: "LogAppendTime"}


def as_sent_record(item: RecordLike) -> SentRecord:
    """Accept a SentRecord or a tuple ``(key, value[, headers[, timestamp_ms[, partition]]])``."""
    if isinstance(item, SentRecord):
        return item
    if not 2 <= len(item) <= 5:
        raise ValueError(
            f"record tuple must be (key, value[, headers[, timestamp_ms[, partition]]]), got {item!r}"
        )
    key, value, *rest = item
    headers = tuple(tuple(h) for h in (rest[0] or ())) if rest else ()
    return SentRecord(key, value, headers, *rest[1:])


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, object] | None = None,
    *,
    timeout: float = 30.0,
) -> None:
    """Create a topic (replication factor 1) and wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    topic_config = {k: str(v) for k, v in (config or {}).items()}
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1, config=topic_config)], request_timeout=timeout
    )
    try:
        futures[name].result(timeout)
    except Exception as err:
        raise BrokerHarnessError(f"creating topic {name!r} with config {topic_config} failed: {err}") from err
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=5).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        time.sleep(0.1)
    raise BrokerHarnessError(f"topic {name!r} has no leader for all {partitions} partitions after {timeout}s")


def _producer_config(
    bootstrap: str,
    compression: str,
    idempotent: bool,
    transactional_id: str | None,
    batch_size: int,
    linger_ms: int,
    extra: Mapping[str, object] | None,
) -> dict[str, object]:
    if compression not in COMPRESSION_CODECS:
        raise ValueError(f"compression must be one of {COMPRESSION_CODECS}, got {compression!r}")
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "enable.idempotence": idempotent or transactional_id is not None,
        "acks": "all",
        "batch.size": batch_size,
        "linger.ms": linger_ms,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    if not config["enable.idempotence"]:
        config["max.in.flight.requests.per.connection"] = 1  # a retry must not reorder the log
    config.update(extra or {})
    return config


def _send(producer, topic: str, records: Iterable[RecordLike], delivered: list, errors: list) -> None:
    for item in records:
        rec = as_sent_record(item)
        index = len(delivered)
        delivered.append(None)

        def on_delivery(err, msg, index=index):
            if err is not None:
                errors.append(f"record #{index}: {err}")
            else:
                delivered[index] = Delivered(msg.partition(), msg.offset(), msg.timestamp()[1])

        kwargs: dict[str, object] = {"key": rec.key, "value": rec.value, "on_delivery": on_delivery}
        if rec.headers:
            kwargs["headers"] = list(rec.headers)
        if rec.timestamp_ms is not None:
            kwargs["timestamp"] = rec.timestamp_ms
        if rec.partition is not None:
            kwargs["partition"] = rec.partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)


def _flush(producer, timeout: float, what: str) -> None:
    left = producer.flush(timeout)
    if left:
        raise BrokerHarnessError(f"{what}: {left} records still undelivered after {timeout}s")


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordLike],
    *,
    compression: str = "none",
    idempotent: bool = False,
    transactional_id: str | None = None,
    abort: bool = False,
    batch_size: int = SMALL_BATCH_BYTES,
    linger_ms: int = 5,
    producer_config: Mapping[str, object] | None = None,
    timeout: float = 30.0,
) -> list[Delivered]:
    """Produce ``records`` in order and wait for every delivery; return where each one landed.

    With ``transactional_id`` all records go into one transaction, committed, or aborted when
    ``abort=True`` (the records are flushed to the log before the abort, so the aborted data is on disk).
    Any delivery error raises BrokerHarnessError.
    """
    if abort and transactional_id is None:
        raise ValueError("abort=True needs a transactional_id")
    if transactional_id is None:
        from confluent_kafka import Producer

        config = _producer_config(
            bootstrap, compression, idempotent, None, batch_size, linger_ms, producer_config
        )
        producer = Producer(config)
        delivered: list[Delivered | None] = []
        errors: list[str] = []
        _send(producer, topic, records, delivered, errors)
        _flush(producer, timeout, f"producing to {topic!r}")
        if errors:
            raise BrokerHarnessError(f"producing to {topic!r} failed: {errors[:5]} ({len(errors)} errors)")
        return list(delivered)  # type: ignore[arg-type]
    return produce_transactions(
        bootstrap,
        topic,
        [Transaction(list(records), commit=not abort)],
        transactional_id=transactional_id,
        compression=compression,
        batch_size=batch_size,
        linger_ms=linger_ms,
        producer_config=producer_config,
        timeout=timeout,
    )


def produce_transactions(
    bootstrap: str,
    topic: str,
    transactions: Sequence[Transaction],
    *,
    transactional_id: str,
    compression: str = "none",
    batch_size: int = SMALL_BATCH_BYTES,
    linger_ms: int = 5,
    producer_config: Mapping[str, object] | None = None,
    timeout: float = 30.0,
) -> list[Delivered]:
    """Run ``transactions`` one after another with one transactional producer (same producer id).

    Each transaction's records are flushed before it is committed or aborted, so aborted records reach
    the log too. Returns the deliveries of all records, in order.
    """
    from confluent_kafka import Producer

    config = _producer_config(
        bootstrap, compression, True, transactional_id, batch_size, linger_ms, producer_config
    )
    producer = Producer(config)
    delivered: list[Delivered | None] = []
    errors: list[str] = []
    producer.init_transactions(timeout)
    for number, txn in enumerate(transactions):
        producer.begin_transaction()
        _send(producer, topic, txn.records, delivered, errors)
        _flush(producer, timeout, f"transaction #{number} on {topic!r}")
        if errors:
            producer.abort_transaction(timeout)
            raise BrokerHarnessError(f"transaction #{number} on {topic!r} failed: {errors[:5]}")
        if txn.commit:
            producer.commit_transaction(timeout)
        else:
            producer.abort_transaction(timeout)
    return list(delivered)  # type: ignore[arg-type]


def describe_topic_configs(
    bootstrap: str, topic: str, *, timeout: float = 30.0
) -> dict[str, tuple[str, str]]:
    """Every config of ``topic`` as the broker describes it (``kafka-configs --describe --all``):
    name -> (value, source name, e.g. DYNAMIC_TOPIC_CONFIG)."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    admin = _admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    return {name: (e.value, ConfigSource(e.source).name) for name, e in entries.items()}


def _partitions(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    meta = _admin(bootstrap).list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        raise BrokerHarnessError(
            f"topic {topic!r} not found on {bootstrap}: {meta.error if meta else 'no metadata'}"
        )
    return sorted(meta.partitions)


def _list_offsets(
    bootstrap: str, topic: str, spec: str, isolation_level: str, timeout: float
) -> dict[int, int]:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    level = {
        "read_uncommitted": IsolationLevel.READ_UNCOMMITTED,
        "read_committed": IsolationLevel.READ_COMMITTED,
    }
    if isolation_level not in level:
        raise ValueError(f"isolation_level must be one of {sorted(level)}, got {isolation_level!r}")
    offset_spec = OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest()
    request = {TopicPartition(topic, p): offset_spec for p in _partitions(bootstrap, topic)}
    admin = _admin(bootstrap)  # keep a reference: the futures never complete once the client is gone
    futures = admin.list_offsets(request, isolation_level=level[isolation_level], request_timeout=timeout)
    return {tp.partition: fut.result(timeout).offset for tp, fut in futures.items()}


def earliest_offsets(bootstrap: str, topic: str, *, timeout: float = 30.0) -> dict[int, int]:
    """Log start offset of every partition."""
    return dict(sorted(_list_offsets(bootstrap, topic, "earliest", "read_uncommitted", timeout).items()))


def latest_offsets(
    bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted", timeout: float = 30.0
) -> dict[int, int]:
    """End offset of every partition: the high watermark, or the last stable offset for read_committed."""
    return dict(sorted(_list_offsets(bootstrap, topic, "latest", isolation_level, timeout).items()))


def consume_all(
    bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted", timeout: float = 60.0
) -> list[ConsumedRecord]:
    """Read every partition from its start to its current end; records sorted by (partition, offset).

    The end is the high watermark (read_uncommitted) or the last stable offset (read_committed), taken
    once before reading. Assign-only consumer, no group membership, no commits.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    ends = latest_offsets(bootstrap, topic, isolation_level=isolation_level, timeout=timeout)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kafka-harness-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "enable.partition.eof": True,
        }
    )
    try:
        starts = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[0] for p in ends
        }
        pending = {p for p, end in ends.items() if end > starts[p]}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        records: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                positions = {
                    tp.partition: tp.offset
                    for tp in consumer.position([TopicPartition(topic, p) for p in pending])
                }
                raise BrokerHarnessError(
                    f"consume_all({topic!r}, {isolation_level}): partitions {sorted(pending)} did not reach their end "
                    f"offsets {[ends[p] for p in sorted(pending)]} within {timeout}s (positions {positions})"
                )
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= ends[msg.partition()]:
                            pending.discard(msg.partition())
                        continue
                    raise BrokerHarnessError(f"consume_all({topic!r}): {err}")
                ts_type, ts = msg.timestamp()
                records.append(
                    ConsumedRecord(
                        topic=msg.topic(),
                        partition=msg.partition(),
                        offset=msg.offset(),
                        key=msg.key(),
                        value=msg.value(),
                        headers=tuple(msg.headers() or ()),
                        timestamp=ts,
                        timestamp_type=_TIMESTAMP_TYPES.get(ts_type, str(ts_type)),
                    )
                )
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
            if pending:
                # Aborted data and transaction markers are skipped without a message; the position still moves.
                for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                    if tp.offset >= ends[tp.partition]:
                        pending.discard(tp.partition)
    finally:
        consumer.close()
    records = [r for r in records if r.offset < ends[r.partition]]
    return sorted(records, key=lambda r: (r.partition, r.offset))


# --------------------------------------------------------------------------------------------------
# Watching the broker's own log cleaner
# --------------------------------------------------------------------------------------------------


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Parse one of the broker's offset checkpoint files (version 0; ``topic partition offset`` lines).

    A deliberately small, independent reader for tests: it must not share code with the suite under test.
    """
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        return {}
    if lines[0].strip() != "0":
        raise BrokerHarnessError(f"{path}: checkpoint version {lines[0]!r}, expected 0")
    count = int(lines[1])
    entries = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.split()
        entries[(topic, int(partition))] = int(offset)
    if len(entries) != count:
        raise BrokerHarnessError(f"{path}: header says {count} entries, found {len(entries)}")
    return entries


def wait_for_broker_cleaning(
    log_dir: Path, topic: str, partition: int, min_offset: int, timeout: float = 60.0
) -> int:
    """Wait until the broker's cleaner has cleaned ``topic-partition`` up to at least ``min_offset``.

    Polls ``cleaner-offset-checkpoint`` in ``log_dir`` (written by the cleaner after each pass; the entry
    is the first dirty offset). Returns the checkpointed offset; raises BrokerHarnessError on timeout.
    """
    path = Path(log_dir) / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + timeout
    while True:
        offset = read_offset_checkpoint(path).get((topic, partition))
        if offset is not None and offset >= min_offset:
            return offset
        if time.monotonic() > deadline:
            raise BrokerHarnessError(
                f"{path}: {topic}-{partition} cleaned up to {offset} after {timeout}s, waited for >= {min_offset}"
            )
        time.sleep(0.2)


def segment_files(partition_dir: Path, suffix: str = ".log") -> list[Path]:
    """Segment files of one partition directory with exactly this suffix, by base offset."""
    return sorted(
        p for p in Path(partition_dir).iterdir() if p.name.endswith(suffix) and p.name[:20].isdigit()
    )


def log_files(partition_dir: Path) -> dict[str, bytes]:
    """Name -> bytes of each ``.log`` segment file of one partition directory."""
    return {p.name: p.read_bytes() for p in segment_files(partition_dir)}


# --------------------------------------------------------------------------------------------------
# pytest wiring
# --------------------------------------------------------------------------------------------------


@dataclass
class _BrokerFactory:
    tmp_path: Path
    lib_dir: Path
    brokers: list[KafkaBroker] = field(default_factory=list)

    def __call__(
        self,
        log_dir: Path | None = None,
        server_props: Mapping[str, object] | None = None,
        *,
        start: bool = True,
        **more_props: object,
    ) -> KafkaBroker:
        """A started broker (``start=False``: just configured). ``log_dir=None``: a fresh one in tmp_path.

        Dotted broker settings go in ``server_props`` (or ``**{"log.cleaner.backoff.ms": 100}``).
        """
        work_dir = self.tmp_path / f"kafka-{len(self.brokers)}"
        broker = KafkaBroker(
            log_dir if log_dir is not None else work_dir / "log-dir",
            work_dir,
            {**(server_props or {}), **more_props},
            lib_dir=self.lib_dir,
        )
        self.brokers.append(broker)
        return broker.start() if start else broker

    def stop_all(self) -> None:
        failures = []
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except BrokerHarnessError as err:
                failures.append(str(err))
        if failures:
            raise BrokerHarnessError("\n".join(failures))


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    """The broker's jar directory, resolved once per session. Skips the test if java or mvn is missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"real-broker tests need {' and '.join(missing)} on PATH (Java 17+, Maven 3.6.3+)")
    return resolve_kafka_jars()


@pytest.fixture(scope="session")
def kafka3_jars() -> Path:
    """The Kafka 3.x broker's jar directory (KAFKA_3), resolved once per session."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"real-broker tests need {' and '.join(missing)} on PATH (Java 17+, Maven 3.6.3+)")
    return resolve_kafka_jars(release=KAFKA_3)


@pytest.fixture(scope="session")
def kafka392_jars(kafka3_jars: Path) -> Path:
    """Kafka 3.9.2's jar directory (KAFKA_3_9_2), resolved once per session."""
    return resolve_kafka_jars(release=KAFKA_3_9_2)


@pytest.fixture
def kafka_broker(kafka_jars: Path, tmp_path: Path) -> Iterator[Callable[..., KafkaBroker]]:
    """Factory of started brokers: ``make_broker(log_dir=None, server_props=None, **more_props)``.

    Every broker it made is stopped cleanly (SIGTERM) at teardown.
    """
    factory = _BrokerFactory(tmp_path, kafka_jars)
    yield factory
    factory.stop_all()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the real broker carry the ``broker`` marker, so ``-m "not broker"`` skips them."""
    for item in items:
        if {"kafka_broker", "kafka_jars", "kafka3_jars"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)


def pytest_sessionfinish(session) -> None:
    """In a pytest-xdist worker: hand this process's broker start times to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["kafka_start_times"] = list(_START_TIMES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """In the pytest-xdist controller: gather the start times of a worker that finished."""
    _START_TIMES.extend(
        tuple(item) for item in getattr(node, "workeroutput", {}).get("kafka_start_times", ())
    )


def pytest_terminal_summary(terminalreporter) -> None:
    if _START_TIMES:
        times = ", ".join(f"{version} {t:.1f}s" for version, t in _START_TIMES)
        terminalreporter.write_line(f"kafka-harness: Kafka broker starts: {times}")
