"""The Maven packages that Spark features of kafka-log-jobs need, and how an embedded session gets them.

* Delta Lake, for ``export --format delta``: ``io.delta:delta-spark_<Spark major.minor>_2.13:<DELTA_VERSION>``
  -- the artifact the delta-spark PyPI package's ``configure_spark_with_delta_pip`` picks for that
  version. delta-spark 4.4.0 supports Spark 4.1 and 4.2 and its jars are on Maven Central. Only the jars
  are needed (the job uses Spark's own DataFrame writer), so the PyPI package is an optional extra
  (``.[delta]``) and stays out of the executors' environment (it would pull in a second pyspark).
* Spark's Kafka connector, ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>`` (the tests
  compare the ``kafka-log`` source with it).
* Apache Iceberg, for ``export --format iceberg``: ``org.apache.iceberg:iceberg-spark-runtime-<Spark
  major.minor>_2.13:<ICEBERG_VERSION>`` and its SQL extensions (``MERGE INTO``), with the SQLite JDBC
  driver ``org.xerial:sqlite-jdbc`` for the embedded catalog (Iceberg's ``JdbcCatalog`` on a SQLite file,
  the same tables pyiceberg's ``SqlCatalog`` reads and writes).

:func:`packages_conf` gives the settings of a session that resolves them when it starts: Spark's Ivy,
from Maven Central only, cached in ``~/.ivy2``. Maven Central only, because Spark's default resolver
chain looks in ``~/.m2`` first and fails on a module whose ``.pom`` is there without its jar (Maven
leaves such entries behind when it resolves a dependency tree). The jars pyspark already ships are not
downloaded again.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

SCALA = "2.13"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Shipped with pyspark itself, and the largest downloads of the connector's dependency tree.
ALREADY_IN_PYSPARK = ("org.apache.hadoop:hadoop-client-runtime", "org.apache.hadoop:hadoop-client-api")
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}" lockStrategy="artifact-lock"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""


def _spark_minor() -> str:
    return ".".join(version("pyspark").split(".")[:2])


#: The Delta Lake release whose jars are loaded (``delta-spark_4.1_2.13:4.4.0`` for our Spark 4.1.1).
DELTA_VERSION = "4.4.0"


#: Iceberg's newest release; its Spark runtime exists for Spark 4.1 (not 4.2: the reason of our pin).
ICEBERG_VERSION = "1.12.0"
SQLITE_JDBC_VERSION = "3.53.2.1"
ICEBERG_EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def iceberg_packages() -> list[str]:
    return [
        f"org.apache.iceberg:iceberg-spark-runtime-{_spark_minor()}_{SCALA}:{ICEBERG_VERSION}",
        f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}",
    ]


def extensions_conf(*, delta: bool = False, iceberg: bool = False) -> dict[str, str]:
    """``spark.sql.extensions`` (and Delta's session catalog) for the table formats a session writes."""
    conf = delta_conf() if delta else {}
    if iceberg:
        extensions = [conf["spark.sql.extensions"]] if delta else []
        conf["spark.sql.extensions"] = ",".join([*extensions, ICEBERG_EXTENSION])
    return conf


def has_iceberg(spark) -> bool:
    return ICEBERG_EXTENSION in spark.conf.get("spark.sql.extensions", "")


def delta_package() -> str:
    return f"io.delta:delta-spark_{_spark_minor()}_{SCALA}:{DELTA_VERSION}"


def kafka_connector_package() -> str:
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{version('pyspark')}"


def delta_conf() -> dict[str, str]:
    """What a session needs to read and write Delta tables (besides the package)."""
    return {"spark.sql.extensions": DELTA_EXTENSION, "spark.sql.catalog.spark_catalog": DELTA_CATALOG}


def has_delta(spark) -> bool:
    return DELTA_EXTENSION in spark.conf.get("spark.sql.extensions", "")


def packages_conf(packages: list[str], ivy_dir: Path | None = None) -> dict[str, str]:
    """Settings that make a new session resolve ``packages`` from Maven Central into ``ivy_dir``."""
    ivy = Path(ivy_dir) if ivy_dir is not None else Path.home() / ".ivy2"
    ivy.mkdir(parents=True, exist_ok=True)
    settings = ivy / "kafka-log-jobs-ivysettings.xml"
    text = IVY_SETTINGS.replace("{cache}", os.fspath(ivy / "cache"))
    if not settings.is_file() or settings.read_text() != text:
        temporary = settings.with_name(f"{settings.name}.{os.getpid()}.tmp")
        temporary.write_text(text)
        os.replace(temporary, settings)
    return {
        "spark.jars.packages": ",".join(packages),
        "spark.jars.ivySettings": os.fspath(settings),
        "spark.jars.ivy": os.fspath(ivy),
        "spark.jars.excludes": ",".join(ALREADY_IN_PYSPARK),
    }
