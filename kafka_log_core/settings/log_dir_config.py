"""Each log dir's configuration, from the log dir itself and the user's files and flags (the driver's step).

For every ``--log-dir`` the driver works out, before any partition is touched:

* the broker that wrote it: ``meta.properties`` (``cluster.id``, ``node.id`` / ``broker.id``, version);
* the cluster metadata: the ``__cluster_metadata-0`` directory found in one of the given log dirs (or
  ``--metadata-log-dir``) whose ``meta.properties`` names the same cluster -- a broker's log dirs share
  one metadata log, and any broker of the cluster holds a copy; with several copies, the one that
  reaches furthest is read;
* the Kafka release whose rules apply (see ``kafka_version``);
* the layered configuration (``config.load_config``) with that release's rules, the metadata log's
  dynamic broker configs (cluster-wide, then this node's) and topic configs.

A metadata log that cannot be read gives one note naming the file and position, and the log dir is
treated as having none: its topics then have no known configuration (never a guess).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kafka_log_core import storage
from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.format.checkpoints import META_PROPERTIES, MetaProperties, read_meta_properties
from kafka_log_core.settings import kafka_version as kv
from kafka_log_core.settings.cluster_metadata import (
    METADATA_LOG_DIR,
    ClusterMetadata,
    find_metadata_log,
    read_cluster_metadata,
)
from kafka_log_core.settings.config import ConfigSet, load_config
from kafka_log_core.settings.kafka_version import KafkaVersion


@dataclass(frozen=True)
class LogDirConfig:
    configs: ConfigSet
    version: KafkaVersion
    version_reason: str
    metadata: ClusterMetadata | None
    metadata_error: str | None
    meta: MetaProperties | None


@dataclass
class _Candidate:
    path: Path
    cluster_id: str | None
    metadata: ClusterMetadata | None = None
    error: str | None = None


def _meta(log_dir: Path) -> tuple[MetaProperties | None, str | None]:
    path = log_dir / META_PROPERTIES
    if not storage.exists(path):
        return None, None
    try:
        return read_meta_properties(path), None
    except (KafkaLogError, OSError) as err:
        return None, f"{err}"


def _candidates(log_dirs: Sequence[Path], metadata_dirs: Sequence[Path]) -> list[_Candidate]:
    found: list[_Candidate] = []
    for d in [*log_dirs, *metadata_dirs]:
        path = d if d.name == METADATA_LOG_DIR and storage.is_dir(d) else find_metadata_log(d)
        if path is None or any(c.path == path.resolve() for c in found):
            continue
        path = path.resolve()
        meta, _ = _meta(path.parent)
        candidate = _Candidate(path, meta.cluster_id if meta else None)
        try:
            candidate.metadata = read_cluster_metadata(path)
        except (KafkaLogError, OSError) as err:
            candidate.error = str(err)
        found.append(candidate)
    return found


def _pick(log_dir: Path, meta: MetaProperties | None, candidates: list[_Candidate]) -> _Candidate | None:
    """The metadata copy of this log dir's cluster: its own, else one whose log dir names the same cluster."""
    own = [c for c in candidates if c.path.parent == log_dir.resolve()]
    cluster = meta.cluster_id if meta else None
    same = own + [c for c in candidates if c not in own and cluster is not None and c.cluster_id == cluster]
    if not same:
        return None
    readable = [c for c in same if c.metadata is not None]
    if not readable:
        return same[0]
    return max(readable, key=lambda c: c.metadata.end_offset if c.metadata else -1)


def decide_version(
    metadata: ClusterMetadata | None, meta: MetaProperties | None, flag: KafkaVersion | None
) -> tuple[KafkaVersion, str]:
    """The release whose rules apply, and why (module docstring of ``kafka_version``)."""
    level = metadata.metadata_version if metadata else None
    if level is not None:
        release = kv.release_of_metadata_version(level)
        name = f"metadata.version {kv.metadata_version_name(level)}"
        if release is None:
            release = kv.LATEST if level > max(kv.METADATA_VERSIONS) else kv.OLDEST_COVERED
            name += f", a level kafka-log-jobs does not know: Kafka {release}'s rules are used"
        elif release.minor_release > kv.LATEST.minor_release:  # the testing level of the newest release
            release = kv.LATEST
            name += (
                f", a testing level of Kafka {release} or a later release: Kafka {release}'s rules are used"
            )
        if flag is not None:
            if flag.minor_release < release.minor_release:
                raise UsageError(
                    f"--kafka-version {flag}: the cluster metadata says {name}, which Kafka {flag} cannot run"
                )
            return flag, f"Kafka {flag} rules (--kafka-version; the cluster metadata says {name})"
        return release, f"Kafka {release} rules (the cluster metadata says {name})"
    if meta is not None and meta.version == 0:
        if flag is not None and flag.major >= 4:
            raise UsageError(
                f"--kafka-version {flag}: meta.properties version=0 was written by a ZooKeeper-mode broker, "
                "i.e. Kafka 3.x or older"
            )
        version = flag or KafkaVersion(3, 9)
        how = "--kafka-version" if flag else "assumed; --kafka-version names the release"
        return version, f"Kafka {version} rules (a ZooKeeper-era log dir, meta.properties version=0; {how})"
    if flag is not None:
        return flag, f"Kafka {flag} rules (--kafka-version)"
    return (
        kv.LATEST,
        f"Kafka {kv.LATEST} rules (no metadata.version to say which release; --kafka-version names it)",
    )


def resolve_log_dir_configs(
    log_dirs: Sequence[str | os.PathLike[str]],
    *,
    conf_dir: str | os.PathLike[str] | None = None,
    config_files: Sequence[str | os.PathLike[str]] = (),
    topic_configs: Sequence[str] = (),
    sets: Sequence[str] = (),
    kafka_version: str | None = None,
    assume_broker_defaults: bool = False,
    metadata_log_dirs: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, LogDirConfig]:
    """The configuration of each log dir (keys: the log dirs as given). ConfigError / UsageError for a
    bad file, flag or version; an unreadable metadata log is reported in ``metadata_error``."""
    flag = KafkaVersion.parse(kafka_version) if kafka_version else None
    dirs = [Path(d) for d in log_dirs]
    candidates = _candidates(dirs, [Path(d) for d in metadata_log_dirs])
    out: dict[str, LogDirConfig] = {}
    built: dict[tuple, ConfigSet] = {}
    for given, d in zip(log_dirs, dirs, strict=True):
        meta, _ = _meta(d)
        chosen = _pick(d, meta, candidates)
        metadata = chosen.metadata if chosen else None
        version, why = decide_version(metadata, meta, flag)
        node_id = meta.node_id if meta else None
        key = (version, id(metadata), node_id)
        if key not in built:
            built[key] = load_config(
                conf_dir, config_files, topic_configs, sets, version=version, metadata=metadata,
                node_id=node_id, assume_broker_defaults=assume_broker_defaults,
            )  # fmt: skip
        configs = built[key]
        error = chosen.error if chosen else None
        if error is not None:
            configs = replace(configs, metadata_problem=f"the cluster metadata log is unreadable ({error})")
        out[os.fspath(given)] = LogDirConfig(configs, version, why, metadata, error, meta)
    return out


def describe(log_dir: str, resolved: LogDirConfig) -> list[str]:
    """The notes the driver prints for one log dir: where its settings come from, and any problem."""
    lines = [f"{log_dir}: {resolved.version_reason}"]
    if not resolved.version.at_least(kv.OLDEST_COVERED.major, kv.OLDEST_COVERED.minor):
        lines.append(f"{log_dir}: Kafka {resolved.version} is older than {kv.OLDEST_COVERED}: not verified")
    if resolved.metadata is not None:
        m = resolved.metadata
        node = resolved.meta.node_id if resolved.meta else None
        lines.append(
            f"{log_dir}: topic and dynamic broker configs from the cluster metadata {m.describe()}"
            + (f", node {node}" if node is not None else "")
        )
        if m.unfinished_transaction:
            lines.append(
                f"{log_dir}: the metadata log ends inside a metadata transaction, which was not applied"
            )
    elif resolved.metadata_error is not None:
        lines.append(
            f"{log_dir}: cluster metadata unreadable, so no topic configuration is known from it: "
            f"{resolved.metadata_error}"
        )
    else:
        lines.append(f"{log_dir}: no cluster metadata log ({METADATA_LOG_DIR}) for this log dir")
    return lines
