"""The jobs on a real Spark cluster, and how the driver hands partitions to the executors.

The cluster is Spark's standalone master and one worker, started from the installed pyspark
(``bin/spark-class``) as their own processes on 127.0.0.1. The worker's ``python3`` is a bare virtualenv
without our dependencies, so the executors can only run the jobs from the environment archive that
``make dist`` builds (``jobs.package``), shipped with ``--archives``. ``compact``, ``retain``
and ``report`` are submitted with ``spark-submit jobs/<job>.py`` and must leave every file byte for byte
as the embedded run (``local[2]``, this interpreter) leaves a copy of the same log dir, with the same
result rows.

The scheduling tests use the shared local session: the largest partitions get the first Spark tasks,
the rows come back in the listing order, and a directory an executor does not see is a failed row
naming the host and the path.
"""

from __future__ import annotations

import filecmp
import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import context, package, runner
from jobs.cli import main
from jobs.spark import is_local_master
from kafka_log_core.simulator.sample import DEFAULT_NOW_MS, generate
from kafka_log_core.work.rows import RetainRow
from kafka_log_core.work.tasks import JobOptions, retain_task
from tests.logbuild import batch, make_log

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
START_TIMEOUT = 180  # seconds for the master or the worker to come up on a busy 2-core machine
SUBMIT_TIMEOUT = 600  # one spark-submit: JVMs, the archive fetched and unpacked, the job
NOW = str(DEFAULT_NOW_MS)
pytestmark = pytest.mark.spark
cluster_test = pytest.mark.cluster


# ------------------------------------------------------------------------------------ the cluster
def _wait_for(log: Path, pattern: str, proc: subprocess.Popen, what: str) -> re.Match:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise RuntimeError(f"{what} did not start (exit {proc.poll()}):\n{tail}")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group (the worker's executors included), SIGKILL after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A directory whose python3 is a virtualenv with nothing installed."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    bindir = root / "bin"
    bindir.mkdir()
    for name in ("python3", "python"):
        (bindir / name).symlink_to(root / "venv" / "bin" / "python")
    return bindir


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, bare_python):
    """A standalone master and one worker (2 cores) on 127.0.0.1; yields the master URL and the
    worker's directory. Both are stopped, with their executors, at the end."""
    root = tmp_path_factory.mktemp("cluster")
    (root / "conf").mkdir()  # no spark-defaults.conf or spark-env.sh from the machine
    env = {
        "HOME": os.environ.get("HOME", str(root)),
        "PATH": f"{bare_python}:/usr/local/bin:/usr/bin:/bin",  # not this virtualenv's bin
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(root / "conf"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        **{k: v for k, v in os.environ.items() if k in ("JAVA_HOME", "LANG", "TMPDIR")},
    }
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = []
    try:
        master_log = root / "master.log"
        with master_log.open("w") as out:
            master = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                 "--webui-port", "0"],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        procs.append(master)
        url = _wait_for(master_log, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master, "master")[
            1
        ]
        worker_log, work = root / "worker.log", root / "work"
        with worker_log.open("w") as out:
            worker = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--port", "0", "--webui-port", "0", "--cores", "2", "--memory", "2g", "--work-dir", str(work)],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        procs.append(worker)
        _wait_for(worker_log, r"Successfully registered with master", worker, "worker")
        yield url, work
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def archive() -> Path:
    """The environment archive of this checkout (built by `make dist`; rebuilt here only if stale)."""
    manifest = package.build(REPO, REPO / "dist", log=lambda m: None)
    return REPO / "dist" / manifest.archive


def _submit(master: str, job: str, args: list[str], *, archive: Path | None, extra: list[str] = ()):
    """spark-submit jobs/<job>.py in client mode: the driver is this interpreter; the executors get
    ``archive`` as ./environment and its Python, or (None) nothing but the worker's own python3."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    shipped = (
        ["--archives", f"{archive}#environment", "--conf", "spark.pyspark.python=./environment/bin/python"]
        if archive
        else []
    )
    cmd = [
        str(Path(sys.executable).parent / "spark-submit"), "--master", master, *shipped,
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--conf", "spark.executor.cores=2", "--conf", "spark.executor.memory=1g",
        "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.task.maxFailures=1", *extra,
        str(REPO / "jobs" / f"{job}.py"), *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=SUBMIT_TIMEOUT, cwd=REPO)


def _rows(stdout: str, log_dir: Path, as_dir: Path) -> list[dict]:
    """The JSON rows without timing, the log dir's path replaced by the one it is compared with."""
    rows = json.loads(stdout.replace(str(log_dir), str(as_dir)))
    return [{k: v for k, v in r.items() if k != "duration_ms"} for r in rows]


def _same_tree(a: Path, b: Path) -> None:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    different = [str(p) for p in files_a if not filecmp.cmp(a / p, b / p, shallow=False)]
    assert different == []


def test_the_worker_python_lacks_our_dependencies(bare_python):
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for module in ("numpy", "numba", "pyarrow", "kafka_log_core"):
        probe = subprocess.run(
            [str(bare_python / "python3"), "-c", f"import {module}"], capture_output=True, env=clean,
            cwd=bare_python,  # as an executor: its own directory, not this checkout
        )  # fmt: skip
        assert probe.returncode != 0, module


@cluster_test
def test_the_archive_holds_the_runtime_and_not_what_the_cluster_brings(archive):
    with tarfile.open(archive) as tar:
        top = {Path(n).parts[3] for n in tar.getnames() if n.startswith("lib/python3") and n.count("/") >= 3}
    assert {"kafka_log_core", "jobs", "spark_udfs", "numpy", "numba", "llvmlite", "pyarrow", "crc32c",
            "cramjam", "lz4", "zstandard", "click"} <= top  # fmt: skip
    assert not top & {"pyspark", "py4j", "pip", "setuptools", "pytest", "kafka", "confluent_kafka", "pandas"}
    manifest = json.loads((archive.parent / package.MANIFEST_NAME).read_text())
    assert manifest["archive_bytes"] == archive.stat().st_size
    mtime = archive.stat().st_mtime_ns
    package.build(REPO, archive.parent, log=lambda m: None)  # same sources: nothing rebuilt
    assert archive.stat().st_mtime_ns == mtime


@cluster_test
def test_compact_retain_report_on_the_cluster_match_the_embedded_run(spark, cluster, archive, tmp_path):
    master, work = cluster
    generate(tmp_path / "made" / "logs", tmp_path / "made" / "conf", now_ms=DEFAULT_NOW_MS)
    conf = tmp_path / "made" / "conf"
    embedded, remote = tmp_path / "embedded", tmp_path / "cluster"
    shutil.copytree(tmp_path / "made" / "logs", embedded)
    shutil.copytree(tmp_path / "made" / "logs", remote)
    events = tmp_path / "events"
    events.mkdir()
    runner = CliRunner()
    for job, extra in (("compact", ["--output", "json"]), ("retain", ["--output", "json"]),
                       ("report", ["--format", "json"])):  # fmt: skip
        args = ["--conf-dir", str(conf), "--now-ms", NOW, *extra]
        here = runner.invoke(main, [job, "--log-dir", str(embedded), *args], catch_exceptions=False)
        assert here.exit_code == 0, here.output
        logging = ["--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false",
                   "--conf", f"spark.eventLog.dir={events.as_uri()}"]  # fmt: skip
        there = _submit(master, job, ["--log-dir", str(remote), *args], archive=archive,
                        extra=logging if job == "compact" else [])  # fmt: skip
        assert there.returncode == 0, there.stderr[-4000:]
        assert _rows(there.stdout, remote, embedded) == _rows(here.stdout, embedded, embedded), job
        _same_tree(embedded, remote)
        # Each job did its work on the sample (so that the trees had something to differ in).
        done = {"compact": "cleaned", "retain": "deleted", "report": "ok"}[job]
        assert done in {r["status"] for r in json.loads(here.stdout)}, job
        assert "failed" not in {r["status"] for r in json.loads(here.stdout)}, job
    # The executors ran from the shipped archive, unpacked in their own directories.
    assert list(work.glob("app-*/*/environment/bin/python"))
    # Spark launched the compact job's tasks in slice order: the largest partition first.
    started = [e["Task Info"]["Index"] for e in _events(events) if e["Event"] == "SparkListenerTaskStart"]
    assert started == sorted(started) and len(started) == len(json.loads(here.stdout))


def _events(directory: Path) -> list[dict]:
    lines = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    return lines


@cluster_test
def test_without_the_archive_the_job_says_what_to_ship_in_one_line(cluster, tmp_path):
    master, _ = cluster
    generate(tmp_path / "logs", tmp_path / "conf", now_ms=DEFAULT_NOW_MS)
    done = _submit(master, "report", ["--log-dir", str(tmp_path / "logs"), "--conf-dir", str(tmp_path / "conf"),
                                      "--now-ms", NOW, "--format", "json"], archive=None)  # fmt: skip
    assert done.returncode == 1
    # spark-submit merges the Python driver's stderr into its stdout: our two lines and nothing else.
    ours = done.stdout.splitlines()
    assert ours[0].startswith("note: nothing sets the executors' Python (spark.pyspark.python)")
    assert re.fullmatch(
        r"Error: the executors' Python cannot import '(jobs|kafka_log_core|numpy)[\w.]*': ship .*", ours[1]
    )
    assert len(ours) == 2


# ------------------------------------------------------------------------------------ scheduling
def _partition_of_size(log_dir: Path, partition: int, batches: int) -> None:
    """``batches`` batches of 20 records of the same size: on-disk size grows with ``batches``."""
    make_log(log_dir, "sized", partition, {0: [batch(20 * i, [(f"k{j}", "v" * 40) for j in range(20)])
                                               for i in range(batches)]})  # fmt: skip


def test_the_largest_partitions_start_first_and_rows_keep_the_listing_order(spark, tmp_path):
    log_dir, journal = tmp_path / "logs", tmp_path / "started.txt"
    batches = {0: 1, 1: 6, 2: 2, 3: 9, 4: 3, 5: 9, 6: 4}  # partitions 3 and 5 tie: listing order
    for partition, count in batches.items():
        _partition_of_size(log_dir, partition, count)
    by_size = sorted(batches, key=lambda p: -batches[p])
    assert by_size == [3, 5, 1, 6, 4, 2, 0]
    sizes = [sum(f.stat().st_size for f in (log_dir / f"sized-{p}").iterdir()) for p in by_size]
    assert sizes == sorted(sizes, reverse=True)
    listing = context.list_tasks([str(log_dir)], None, writing=False)
    assert [t.partition for t in listing.tasks] == list(range(7))

    def started(task):
        with open(journal, "a") as f:
            f.write(f"{task.partition}\n")
        time.sleep(1.0)  # the first two tasks overlap: both have written before a third can start
        return {"topic": task.topic, "partition": task.partition}

    rows = runner.run_distributed(spark, listing.tasks, started)
    assert [r["partition"] for r in rows] == list(range(7))
    starts = [int(line) for line in journal.read_text().splitlines()]
    assert sorted(starts[:2]) == [3, 5]  # local[2]: the two largest took the two cores
    for i, partition in enumerate(by_size):  # two starting at the same instant may swap, no more
        assert all(starts.index(partition) < starts.index(later) for later in by_size[i + 2 :])


def test_an_executor_that_cannot_see_a_directory_gives_a_failed_row_with_host_and_path(spark, tmp_path):
    log_dir = tmp_path / "logs"
    for partition in range(3):
        _partition_of_size(log_dir, partition, 2)
    listing = context.list_tasks([str(log_dir)], None, writing=True)
    hidden = log_dir / "sized-1"
    hidden.rename(tmp_path / "elsewhere")  # listed by the driver, not there for the executor
    fn = functools.partial(
        retain_task,
        configs=context.load_configs([str(log_dir)], context.ConfigSources(assume_broker_defaults=True)),
        opts=JobOptions(now_ms=0),
    )
    rows = [o.row for o in runner.run_distributed(spark, listing.tasks, fn, RetainRow)]
    assert [r["status"] for r in rows] == ["skipped", "failed", "skipped"]
    assert rows[1]["reason"].startswith(
        f"{hidden}: no such directory on executor host {socket.gethostname()}"
    )
    assert rows[1]["segments_deleted"] == 0 and rows[1]["topic"] == "sized" and rows[1]["partition"] == 1

    shutil.move(log_dir, tmp_path / "gone")  # the whole log dir
    rows = [o.row for o in runner.run_distributed(spark, listing.tasks, fn, RetainRow)]
    assert {r["status"] for r in rows} == {"failed"}
    assert all(r["reason"].startswith(f"{log_dir}: no such directory on executor host") for r in rows)


@pytest.mark.parametrize(
    "master, local",
    [("local", True), ("local[2]", True), ("local[*]", True), ("local[4,2]", True),
     ("local-cluster[2,1,1024]", False), ("spark://127.0.0.1:7077", False), ("yarn", False),
     ("k8s://https://10.0.0.1:6443", False)],
)  # fmt: skip
def test_only_a_local_master_runs_executors_in_the_drivers_python(master, local):
    assert is_local_master(master) is local
