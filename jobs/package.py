"""What a Spark cluster needs to run the jobs: the project's wheel and a relocatable Python environment.

    kafka-log-jobs package [--out dist] [--source .] [--python PATH] [--python-prefix PREFIX] [--force]

Executors run Python code of ours that needs compiled libraries (numpy, numba/llvmlite, pyarrow, crc32c,
cramjam, lz4, zstandard): ``--py-files`` cannot carry them. Spark's answer is an environment archive
shipped with ``--archives ENV.tar.gz#environment`` and ``spark.pyspark.python=./environment/bin/python``.
This module builds, in ``--out``:

* ``kafka_log_jobs-<version>-py3-none-any.whl``, the project (``pip wheel`` of ``--source``);
* ``kafka-log-jobs-env.tar.gz``, a virtualenv packed by venv-pack with the wheel and its runtime
  dependencies, pinned to the versions installed here (the executors run what the driver runs). It
  holds no pyspark or py4j (the cluster's Spark puts its own on the workers' ``PYTHONPATH``), no pip or
  setuptools, no test suites or C headers of the libraries, and numba's compiled kernels for this
  machine's CPU (cache files next to the sources; a different CPU recompiles them on first use);
* ``kafka-log-jobs-env.json``: what was built from what (a fingerprint of the sources, the Python, the
  pinned versions), its size and how long it took. A second run with the same fingerprint does nothing.

venv-pack does not copy the interpreter: ``bin/python`` links to the base Python the environment was
made with (``--python``), or to ``PREFIX/bin/python3.X`` with ``--python-prefix``. Every node needs that
Python at that path, the same minor version as the driver's.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from kafka_log_core.errors import UsageError

ARCHIVE_NAME = "kafka-log-jobs-env.tar.gz"
MANIFEST_NAME = "kafka-log-jobs-env.json"
PROJECT = "kafka-log-jobs"
SOURCE_PACKAGES = ("kafka_log_core", "jobs", "spark_udfs")
# Brought by the cluster's Spark (SPARK_HOME/python/lib on every worker's PYTHONPATH), so not packed.
CLUSTER_PROVIDED = frozenset({"pyspark", "py4j"})
# Never imported by the jobs at run time: build tools and the libraries' own test suites and headers.
BUILD_TOOLS = ("pip", "setuptools", "wheel")
PRUNED = (
    "numba/tests",
    "llvmlite/tests",
    "numpy/*/tests",
    "numpy/tests",
    "numpy/_core/include",
    "numpy/f2py",
    "pyarrow/tests",
    "pyarrow/include",
    "pyarrow/src",
    "pyarrow/_pyarrow_cpp_tests*",
    # Arrow Flight (an RPC framework) is a module of its own that nothing here imports.
    "pyarrow/flight.py",
    "pyarrow/_flight*",
    "pyarrow/libarrow_flight*",
    "pyarrow/libarrow_python_flight*",
)
# What the executors (and a driver in cluster deploy mode) import, checked in the packed environment.
IMPORTS = (
    "jobs.cli",
    "kafka_log_core.work.tasks",
    "kafka_log_core.work.report",
    "jobs.compact",
    "jobs.retain",
    "jobs.report",
    "spark_udfs",
    "pyarrow.parquet",
    "numba",
)


@dataclass(frozen=True)
class Manifest:
    fingerprint: str
    wheel: str
    archive: str
    archive_bytes: int
    build_seconds: float
    python: str  # the interpreter bin/python links to on the nodes
    python_version: str
    packages: dict[str, str]  # name -> version, as packed

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _source_files(source: Path) -> list[Path]:
    files = [source / "pyproject.toml"]
    for package in SOURCE_PACKAGES:
        files += sorted(p for p in (source / package).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _requirement_name(requirement: str) -> str:
    return _canonical(re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0])


def installed_versions(root: str = PROJECT) -> dict[str, str]:
    """The runtime dependencies of ``root`` installed here, transitively (canonical name -> version):
    the pins of the environment, and part of its fingerprint. Extras and the cluster's own are left out."""
    pins: dict[str, str] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in dist.requires or []:
            dep = _requirement_name(requirement)
            if "extra ==" in requirement or dep in CLUSTER_PROVIDED or dep in pins:
                continue
            try:
                pins[dep] = importlib.metadata.version(dep)
            except importlib.metadata.PackageNotFoundError:
                continue  # a dependency of another platform (environment marker)
            todo.append(dep)
    return pins


def fingerprint(source: Path, python: str, python_prefix: str | None, pins: dict[str, str]) -> str:
    """Changes when anything that goes into the archive changes: sources, interpreter, pinned versions."""
    h = hashlib.sha256()
    for path in _source_files(source):
        h.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(json.dumps([python, python_prefix, sorted(pins.items())]).encode())
    return h.hexdigest()


def _copy_sources(source: Path, target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    target.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(source / name, target / name)
    for package in SOURCE_PACKAGES:
        shutil.copytree(source / package, target / package, ignore=ignore)
    return target


def runtime_requirements(wheel: Path) -> list[str]:
    """The wheel's own requirements without extras and without what the cluster provides."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(name).decode()
    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = line.split(":", 1)[1].strip()
        if "extra ==" in requirement:
            continue
        if _requirement_name(requirement) in CLUSTER_PROVIDED:
            continue
        out.append(requirement)
    return out


def _run(cmd: list[str], what: str, **kw) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise UsageError(f"{what} failed ({' '.join(cmd[:4])} ...):\n{tail}")
    return proc.stdout


def _prune(site_packages: Path, patterns: Iterable[str]) -> None:
    for pattern in patterns:
        for path in site_packages.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _pyspark_path() -> str:
    """The PYTHONPATH Spark gives Python workers: its pyspark.zip and py4j zip (here, our pyspark's)."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.zip")))


def _site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python3*/site-packages"))
    if not found:
        raise UsageError(f"{env}: no lib/python3*/site-packages in the new environment")
    return found[0]


def build(
    source: Path,
    out: Path,
    *,
    python: str | None = None,
    python_prefix: str | None = None,
    force: bool = False,
    log=print,
) -> Manifest:
    """Build (or find up to date) the wheel and the environment archive in ``out``."""
    source, out = source.resolve(), out.resolve()
    if not (source / "pyproject.toml").is_file():
        raise UsageError(f"{source}: no pyproject.toml (run from a source checkout, or pass --source)")
    python = python or sys.executable
    pins = installed_versions()
    print_ = fingerprint(source, python, python_prefix, pins)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path, archive = out / MANIFEST_NAME, out / ARCHIVE_NAME
    if not force and manifest_path.is_file() and archive.is_file():
        try:
            old = Manifest(**json.loads(manifest_path.read_text()))
        except (ValueError, TypeError):
            old = None
        if old is not None and old.fingerprint == print_ and (out / old.wheel).is_file():
            log(f"{archive}: up to date ({old.archive_bytes / 1e6:.0f} MB)")
            return old
    try:
        import venv_pack
    except ModuleNotFoundError:
        raise UsageError(
            "venv-pack is not installed: pip install 'kafka-log-jobs[package]' (or venv-pack)"
        ) from None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=".build-", dir=out) as tmp:
        work = Path(tmp)
        log(f"wheel of {source}")
        for old_wheel in out.glob("kafka_log_jobs-*.whl"):
            old_wheel.unlink()
        tree = _copy_sources(source, work / "src")  # setuptools leaves build/ behind: not in the checkout
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out),
              str(tree)], "pip wheel")  # fmt: skip
        wheel = next(out.glob("kafka_log_jobs-*.whl"))
        env = work / "env"
        log(f"environment from {python}")
        _run([python, "-m", "venv", str(env)], "python -m venv")
        env_python = str(env / "bin" / "python")
        constraints = work / "constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        pip = [env_python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run([*pip, "--no-deps", str(wheel)], "pip install (the wheel)")
        _run(
            [*pip, "--constraint", str(constraints), *runtime_requirements(wheel)],
            "pip install (dependencies)",
        )
        _run([env_python, "-m", "pip", "uninstall", "--quiet", "--yes", *BUILD_TOOLS], "pip uninstall")
        site = _site_packages(env)
        _prune(site, PRUNED)
        leaked = sorted(
            CLUSTER_PROVIDED & {_canonical(p.name.split("-")[0]) for p in site.glob("*.dist-info")}
        )
        if leaked:
            raise UsageError(f"{', '.join(leaked)} ended up in the environment: the cluster brings its own")
        log("compiling the kernels (numba cache) and checking the imports")
        check_env = dict(os.environ, PYTHONPATH=_pyspark_path())
        check_env.pop("VIRTUAL_ENV", None)
        # In the new environment, from a directory of its own: never this checkout's modules.
        run_there = dict(env=check_env, cwd=work)
        _run([env_python, "-c", f"import {', '.join(IMPORTS)}"], "import check", **run_there)
        _run([env_python, "-c", f"from jobs.package import warm_up; warm_up({str(work / 'warm')!r})"],
             "numba warm-up", **run_there)  # fmt: skip
        packages = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions(path=[str(site)])}
        version = _run(
            [env_python, "-c", "import platform; print(platform.python_version())"], "python"
        ).strip()
        log(f"packing {archive.name}")
        partial = work / ARCHIVE_NAME
        venv_pack.pack(prefix=str(env), output=str(partial), python_prefix=python_prefix, force=True)
        os.chmod(partial, 0o644)
        os.replace(partial, archive)
        linked = os.path.realpath(env / "bin" / "python")
        if python_prefix:
            linked = str(Path(python_prefix) / "bin" / Path(linked).name)
    manifest = Manifest(
        fingerprint=print_,
        wheel=wheel.name,
        archive=archive.name,
        archive_bytes=archive.stat().st_size,
        build_seconds=round(time.monotonic() - started, 1),
        python=linked,
        python_version=version,
        packages=packages,
    )
    manifest_path.write_text(manifest.to_json())
    log(f"{wheel}\n{archive}: {manifest.archive_bytes / 1e6:.0f} MB in {manifest.build_seconds:.0f} s "
        f"(Python {version} at {linked} on every node)")  # fmt: skip
    return manifest


def warm_up(work: str) -> None:
    """Run report, compact and retain on the sample log dir, in the environment being packed, so that
    numba's cache beside our sources holds every kernel the jobs call."""
    from kafka_log_core.format.filenames import list_partition_dirs
    from kafka_log_core.log.partition_log import LogDirState
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.simulator.sample import DEFAULT_NOW_MS, generate
    from kafka_log_core.work.outcome import Status
    from kafka_log_core.work.report import report_partition
    from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition, retain_partition

    logs, conf = Path(work) / "logs", Path(work) / "conf"
    generate(logs, conf, now_ms=DEFAULT_NOW_MS)
    configs = load_config(conf, [], [], [])
    for fn, opts in (
        (report_partition, JobOptions(now_ms=DEFAULT_NOW_MS, dry_run=True)),
        (compact_partition, JobOptions(now_ms=DEFAULT_NOW_MS)),
        (retain_partition, JobOptions(now_ms=DEFAULT_NOW_MS)),
    ):
        state = LogDirState.read(logs)
        for tp, _ in list_partition_dirs(logs):
            row = fn(PartitionTask(str(logs), tp.topic, tp.partition, state.for_partition(tp)), configs, opts)
            if row["status"] == Status.FAILED:
                raise RuntimeError(f"warm-up {fn.__name__} {tp}: {row['reason']}")


@click.command("package")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="dist",
    show_default=True,
    help="Where the wheel, the archive and its manifest go.",
)
@click.option(
    "--source",
    type=click.Path(file_okay=False, exists=True),
    default=".",
    show_default=True,
    help="The project's source checkout (with pyproject.toml).",
)
@click.option(
    "--python",
    "python",
    default=None,
    help="Interpreter the environment is made with (default: this one's base Python).",
)
@click.option(
    "--python-prefix",
    default=None,
    help="Where Python lives on the cluster's nodes, e.g. /usr (bin/python links to PREFIX/bin).",
)
@click.option("--force", is_flag=True, help="Rebuild even when the manifest says it is up to date.")
def command(out: str, source: str, python: str | None, python_prefix: str | None, force: bool) -> None:
    """Build the project's wheel and the Python environment archive the executors need (make dist)."""
    try:
        build(
            Path(source),
            Path(out),
            python=python,
            python_prefix=python_prefix,
            force=force,
            log=lambda m: click.echo(m, err=True),
        )
    except UsageError as err:
        raise click.ClickException(str(err)) from err
