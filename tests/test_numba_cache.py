"""numba's cache of the kernels is dropped when any source they are compiled from changes (numba itself
checks a cached function against its own file only)."""

import os
import subprocess
import sys
import textwrap

from kafka_log_core import numba_cache

_RUN = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from kafka_log_core import numba_cache
    numba_cache.drop_stale(sys.argv[2])
    from pkg.kernels import caller
    print(caller.twice())
    """
)


def _package(root):
    kernels = root / "pkg" / "kernels"
    kernels.mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (kernels / "__init__.py").write_text("")
    (kernels / "callee.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef one():\n    return 1\n"
    )
    (kernels / "caller.py").write_text(
        "from numba import njit\nfrom pkg.kernels.callee import one\n\n"
        "@njit(cache=True)\ndef twice():\n    return 2 * one()\n"
    )
    return root / "pkg"


def _run(root, package):
    project = os.path.dirname(numba_cache.PACKAGE)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(root), str(package)], env=env, cwd=project,
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def test_a_callee_changed_in_another_file_is_compiled_again(tmp_path):
    package = _package(tmp_path)
    assert _run(tmp_path, package) == "2"
    assert any(n.endswith(".nbi") for n in os.listdir(package / "kernels" / "__pycache__"))
    (package / "kernels" / "callee.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef one():\n    return 5\n"
    )
    assert _run(tmp_path, package) == "10"  # the caller's cached code called the old callee


def test_the_cache_stays_while_the_sources_stay(tmp_path):
    package = _package(tmp_path)
    assert numba_cache.drop_stale(str(package))
    cached = package / "kernels" / "__pycache__" / "caller.twice-5.py311.nbi"
    cached.write_bytes(b"index")
    assert not numba_cache.drop_stale(str(package))
    assert cached.exists()
    (package / "kernels" / "callee.py").write_text("# changed\n")
    assert numba_cache.drop_stale(str(package))
    assert not cached.exists()


def test_a_package_that_cannot_be_written_is_left_as_it_is(tmp_path):
    package = _package(tmp_path)
    (package / "kernels" / "__pycache__").mkdir()
    os.chmod(package / "kernels" / "__pycache__", 0o555)
    try:
        if os.access(package / "kernels" / "__pycache__", os.W_OK):
            return  # running as root: nothing is read-only
        assert not numba_cache.drop_stale(str(package))
    finally:
        os.chmod(package / "kernels" / "__pycache__", 0o755)


def test_a_cache_outside_the_package_goes_when_the_package_changes(tmp_path):
    package = _package(tmp_path)
    outside = tmp_path / "bench"
    (outside / "__pycache__").mkdir(parents=True)
    cached = outside / "__pycache__" / "phases.compress_all-82.py311.nbi"
    assert numba_cache.drop_stale(str(package), outside=str(outside))
    cached.write_bytes(b"index")
    assert not numba_cache.drop_stale(str(package), outside=str(outside))
    assert numba_cache.drop_stale(str(package))  # the package's own stamp is apart
    assert cached.exists()
    (package / "kernels" / "callee.py").write_text("# changed\n")
    assert numba_cache.drop_stale(str(package), outside=str(outside))
    assert not cached.exists()
