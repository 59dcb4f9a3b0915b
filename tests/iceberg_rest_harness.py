"""A real Iceberg REST catalog on 127.0.0.1 for the tests: Iceberg's own REST catalog server
(``org.apache.iceberg.rest.RESTCatalogServer``, the server of its REST compatibility kit, published on Maven
Central as ``iceberg-open-api``'s test fixtures), its jars resolved by Maven as the broker's are
(tests/iceberg_rest/pom.xml), run as a JVM of its own: a JdbcCatalog on a SQLite file behind the REST API,
its warehouse a local directory.

    def test_x(iceberg_rest):
        uri = iceberg_rest.uri          # http://127.0.0.1:<port>/
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka_harness import _JVM_FLAGS, BrokerHarnessError, _free_ports, _tail, resolve_jars

POM = Path(__file__).resolve().parent / "iceberg_rest" / "pom.xml"
LIB_DIR = POM.parent / "target" / "lib"
MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RestCatalog:
    uri: str
    warehouse: Path
    process: subprocess.Popen
    log: Path


def resolve_rest_catalog_jars() -> Path:
    return resolve_jars(POM, LIB_DIR, expected="iceberg-open-api-", what="Iceberg's REST catalog server")


def start_rest_catalog(work: Path, lib_dir: Path) -> RestCatalog:
    """The server started with its catalog and warehouse under ``work``; returns once it answers
    ``GET /v1/config``."""
    work.mkdir(parents=True, exist_ok=True)
    (port,) = _free_ports(1)
    env = {
        **os.environ,
        # The server's settings are catalog properties from CATALOG_* variables (__ -> -, _ -> .):
        "CATALOG_REST_PORT": str(port),  # rest.port
        "CATALOG_URI": f"jdbc:sqlite:{work / 'rest-catalog.db'}",
        "CATALOG_WAREHOUSE": str(work / "warehouse"),
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
    }
    log = work / "rest-catalog.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["java", "-Xmx256m", *_JVM_FLAGS, "-cp", str(lib_dir / "*"), MAIN],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    uri = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise BrokerHarnessError(
                f"the REST catalog exited with code {process.returncode}:\n{_tail(log.read_text(), 30)}"
            )
        try:
            with urllib.request.urlopen(uri + "v1/config", timeout=5) as answer:
                json.loads(answer.read())
            return RestCatalog(uri, work / "warehouse", process, log)
        except (urllib.error.URLError, OSError, ValueError):
            if time.monotonic() > deadline:
                process.kill()
                raise BrokerHarnessError(
                    f"the REST catalog did not answer within {START_TIMEOUT_S:.0f}s:\n{_tail(log.read_text(), 30)}"
                ) from None
            time.sleep(0.5)


def stop(catalog: RestCatalog) -> None:
    catalog.process.terminate()
    try:
        catalog.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        catalog.process.kill()
        catalog.process.wait()


@pytest.fixture
def iceberg_rest(tmp_path: Path) -> Iterator[RestCatalog]:
    """A started REST catalog, stopped at teardown. Skips the test if java or mvn is missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the REST catalog tests need {' and '.join(missing)} on PATH (Java 17+, Maven 3.6.3+)")
    catalog = start_rest_catalog(tmp_path / "rest", resolve_rest_catalog_jars())
    try:
        yield catalog
    finally:
        stop(catalog)
