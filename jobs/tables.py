"""Where an export's tables go: Parquet files, a Delta Lake table, an Iceberg table in a catalog.

Each is written with Spark's own writers in one commit (Delta, Iceberg) or one overwrite (Parquet):

* ``replace``: the table replaced as a whole (Delta's overwrite, Iceberg's ``createOrReplace``: a REPLACE
  TABLE AS SELECT, atomic in Iceberg's catalogs), carrying the export's state;
* ``merge``: one ``MERGE INTO`` of the changes by key (Delta, Iceberg): a newer value replaces, a dropped
  row (a tombstone, or a record that now belongs to the other table) deletes, and rows the plan drops
  (``delete``: a partition read whole again, rows below a new log start, a partition gone) are deleted by
  ``WHEN NOT MATCHED BY SOURCE``; the export's new state goes into the same commit.

The state (kafka_log_core.work.table_state) is the commit metadata of the table's last commit: an
Iceberg snapshot's summary (``spark.sql.iceberg.snapshot-property.*`` for MERGE, the ``snapshot-property``
write option for a replace) or a Delta commit's ``userMetadata``. A table whose last commit carries none
(another writer committed since) gets a full export.

**The embedded Iceberg catalog**: Iceberg's ``JdbcCatalog`` on a SQLite file, ``<out>/catalog.db``, with
the warehouse (data and metadata files) under ``<out>``: no server. pyiceberg's ``SqlCatalog`` reads the
same file (``SqlCatalog(<catalog name>, uri="sqlite:///<out>/catalog.db", warehouse="file://<out>")``).
Another catalog (REST, Hive, a JDBC database) by ``--catalog-type``/``--catalog-uri``/``--catalog-option``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.work.table_state import STATE_KEY, TableState

PARQUET, DELTA, ICEBERG = "parquet", "delta", "iceberg"
FORMATS = (PARQUET, DELTA, ICEBERG)
CATALOG_TYPES = ("jdbc", "rest", "hive", "hadoop")
SQLITE_CATALOG = "catalog.db"
#: Iceberg table properties: format v2, and row-level changes written as delete files (merge-on-read), so
#: that an upsert of a few keys does not rewrite every data file holding a row.
ICEBERG_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}
DELTA_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
ICEBERG_SESSION_PROPERTY = f"spark.sql.iceberg.snapshot-property.{STATE_KEY}"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class IcebergCatalog:
    """A Spark catalog of Iceberg tables, configured in the session when first used."""

    name: str
    warehouse: str
    catalog_type: str = "jdbc"
    uri: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise UsageError(f"--catalog-name {self.name!r}: letters, digits and _ only")

    @property
    def resolved_uri(self) -> str | None:
        if self.uri is None and self.catalog_type == "jdbc":
            return f"jdbc:sqlite:{os.path.join(os.path.abspath(self.warehouse), SQLITE_CATALOG)}"
        return self.uri

    def conf(self) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": self.catalog_type,
            f"{prefix}.warehouse": self.warehouse
            if "://" in self.warehouse
            else os.path.abspath(self.warehouse),
        }
        if self.resolved_uri is not None:
            conf[f"{prefix}.uri"] = self.resolved_uri
        if self.catalog_type == "jdbc":
            conf[f"{prefix}.jdbc.schema-version"] = "V1"  # the schema pyiceberg's SqlCatalog writes too
        conf.update({f"{prefix}.{k}": v for k, v in self.options})
        return conf

    def configure(self, spark) -> None:
        """Set the catalog in the session; refused if the session has this name for another catalog
        (Spark keeps a catalog it has loaded: a second warehouse needs another name)."""
        for key, value in self.conf().items():
            current = spark.conf.get(key, None)
            if current is not None and current != value:
                raise UsageError(
                    f"the Spark session's catalog {self.name} has {key}={current}, not {value}: "
                    "give this export another --catalog-name"
                )
            spark.conf.set(key, value)
        if self.catalog_type == "jdbc" and self.warehouse and "://" not in self.warehouse:
            Path(self.warehouse).mkdir(parents=True, exist_ok=True)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Table:
    """One table of an export: a path (Parquet, Delta) or a catalog table (Iceberg)."""

    fmt: str
    path: str | None = None
    catalog: IcebergCatalog | None = None
    namespace: str = ""
    name: str = ""

    @property
    def describe(self) -> str:
        return self.path if self.path is not None else f"{self.catalog.name}.{self.namespace}.{self.name}"  # type: ignore[union-attr]

    @property
    def sql(self) -> str:
        """How Spark SQL names the table."""
        if self.fmt == ICEBERG:
            return ".".join(quote(p) for p in (self.catalog.name, self.namespace, self.name))  # type: ignore[union-attr]
        return f"{self.fmt}.{quote(os.path.abspath(self.path))}"  # type: ignore[arg-type]

    # ------------------------------------------------------------------ reading
    def exists(self, spark) -> bool:
        if self.fmt == ICEBERG:
            return bool(spark.catalog.tableExists(f"{self.catalog.name}.{self.namespace}.{self.name}"))  # type: ignore[union-attr]
        if self.fmt == DELTA:
            return (Path(self.path) / "_delta_log").is_dir()  # type: ignore[arg-type]
        return Path(self.path).is_dir()  # type: ignore[arg-type]

    def read(self, spark):
        if self.fmt == ICEBERG:
            return spark.table(self.sql)
        return spark.read.format(self.fmt).load(self.path)

    def state(self, spark) -> TableState | None:
        """The export state of the table's last commit (None: no table, Parquet, or not an export's)."""
        if self.fmt == PARQUET or not self.exists(spark):
            return None
        if self.fmt == ICEBERG:
            last = spark.sql(
                f"SELECT s.summary FROM {self.sql}.snapshots s JOIN {self.sql}.history h "
                "ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor ORDER BY h.made_current_at DESC LIMIT 1"
            ).collect()
            text = last[0]["summary"].get(STATE_KEY) if last else None
        else:
            last = spark.sql(f"DESCRIBE HISTORY {self.sql} LIMIT 1").collect()
            metadata = last[0]["userMetadata"] if last else None
            text = _from_user_metadata(metadata)
        return None if text is None else TableState.from_json(text, self.describe)

    # ------------------------------------------------------------------ writing
    def replace(self, spark, df, state: TableState | None, partition_by: Sequence[str] = ()) -> None:
        text = None if state is None else state.to_json()
        if self.fmt == ICEBERG:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {quote(self.catalog.name)}.{quote(self.namespace)}")  # type: ignore[union-attr]
            writer = df.writeTo(self.sql)
            for key, value in ICEBERG_PROPERTIES.items():
                writer = writer.tableProperty(key, value)
            if partition_by:
                from pyspark.sql import functions as F

                writer = writer.partitionedBy(*[F.col(c) for c in partition_by])
            if text is not None:
                writer = writer.option(f"snapshot-property.{STATE_KEY}", text)
            writer.createOrReplace()
            return
        writer = df.write.mode("overwrite")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        if self.fmt == DELTA:
            writer = writer.format("delta").option("overwriteSchema", "true")
            if text is not None:
                writer = writer.option("userMetadata", _user_metadata(text))
            writer.save(self.path)
        else:
            writer.parquet(self.path)

    def merge(
        self, spark, changes, *, on: Sequence[str], columns: Sequence[str], drop: str,
        delete: str | None, state: TableState,
    ) -> None:  # fmt: skip
        """One MERGE INTO of ``changes`` (a DataFrame with ``columns`` and the columns ``drop`` reads) by
        ``on``: rows where ``drop`` holds delete their match, the others replace or insert it; target rows
        no change matches are deleted where ``delete`` (over the target, alias ``t``) holds."""
        if self.fmt not in (DELTA, ICEBERG):
            raise UsageError(
                f"--incremental needs a table format with commits (delta, iceberg), not {self.fmt}"
            )
        view = f"kafka_log_changes_{os.getpid()}_{id(changes)}"
        changes.createOrReplaceTempView(view)
        condition = " AND ".join(f"t.{quote(c)} = s.{quote(c)}" for c in on)
        assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
        names = ", ".join(quote(c) for c in columns)
        values = ", ".join(f"s.{quote(c)}" for c in columns)
        sql = (
            f"MERGE INTO {self.sql} t USING {view} s ON {condition} "
            f"WHEN MATCHED AND ({drop}) THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {assignments} "
            f"WHEN NOT MATCHED AND NOT ({drop}) THEN INSERT ({names}) VALUES ({values})"
        )
        if delete:
            sql += f" WHEN NOT MATCHED BY SOURCE AND ({delete}) THEN DELETE"
        key = ICEBERG_SESSION_PROPERTY if self.fmt == ICEBERG else DELTA_USER_METADATA
        value = state.to_json() if self.fmt == ICEBERG else _user_metadata(state.to_json())
        spark.conf.set(key, value)
        try:
            spark.sql(sql)
        finally:
            spark.conf.unset(key)
            spark.catalog.dropTempView(view)


def _user_metadata(state: str) -> str:
    return json.dumps({STATE_KEY: json.loads(state)}, sort_keys=True)


def _from_user_metadata(metadata: str | None) -> str | None:
    if not metadata:
        return None
    try:
        found = json.loads(metadata)
    except json.JSONDecodeError:
        return None
    if not isinstance(found, dict) or STATE_KEY not in found:
        return None
    return json.dumps(found[STATE_KEY])


def check_format(fmt: str, spark) -> None:
    """The session can write the format (its packages and extensions are loaded)."""
    from spark_udfs import packages

    if fmt == DELTA and not packages.has_delta(spark):
        raise KafkaLogError("the Spark session has no Delta Lake (spark.sql.extensions)")
    if fmt == ICEBERG and not packages.has_iceberg(spark):
        raise KafkaLogError("the Spark session has no Iceberg (spark.sql.extensions)")
