"""The layout's rules, read from the import statements of every module (AST, no import is run).

* The core (``kafka_log_core``) never imports ``jobs``, ``spark_udfs``, ``pyspark`` or the simulator.
* Inside the core, a layer imports only its own layer and the layers below it (the order is written in
  ``kafka_log_core/__init__.py``).
* ``spark_udfs`` (the data source) never imports ``jobs``: the jobs sit on top of it.
* No job imports the simulator; ``jobs/package.py`` alone may, inside ``warm_up``, which runs at build
  time (``make dist``) to compile the kernels in the packed environment on a sample log dir.
* No module imports a private (``_name``) from another module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORE = "kafka_log_core"
SIMULATOR = f"{CORE}.simulator"
# Bottom to top; the root modules of kafka_log_core are layer 0.
LAYERS = {
    "format": 1,
    "kernels": 2,
    "log": 3,
    "settings": 3,
    "registry": 3,
    "rules": 4,
    "tools": 5,
    "work": 5,
    "simulator": 6,
}
# Same-rank layers that must not import each other either.
INDEPENDENT = {
    frozenset({"log", "settings"}),
    frozenset({"log", "registry"}),
    frozenset({"registry", "settings"}),
    frozenset({"tools", "work"}),
}
# Build-time uses of the simulator on the jobs side: (module, enclosing function).
SIMULATOR_AT_BUILD_TIME = {("jobs.package", "warm_up")}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


def imports(path: Path, name: str) -> list[tuple[str, tuple[str, ...], str | None]]:
    """(imported module, imported names, enclosing function or None) of every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, tuple[str, ...], str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, (), function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                found.append((base, tuple(alias.name for alias in child.names), function))
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            visit(child, inner)

    visit(tree, None)
    return found


def targets(module: str, names: tuple[str, ...]) -> list[str]:
    """The modules an import statement reaches: ``from a import b`` reaches ``a.b`` when that is a module."""
    reached = [module]
    for name in names:
        candidate = REPO.joinpath(*f"{module}.{name}".split("."))
        if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
            reached.append(f"{module}.{name}")
    return reached


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != CORE:
        return None
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else "root"


def rank(layer_name: str) -> int:
    return LAYERS.get(layer_name, 0)


CORE_MODULES = modules(CORE)


def test_the_layout_has_the_layers_it_documents():
    assert {layer(name) for name, _ in CORE_MODULES} == {"root", *LAYERS}


@pytest.mark.parametrize("name,path", CORE_MODULES, ids=[name for name, _ in CORE_MODULES])
def test_a_core_module_imports_only_its_layer_and_the_layers_below(name, path):
    own = layer(name)
    problems = []
    for module, names, _ in imports(path, name):
        top = module.split(".")[0]
        if top in ("jobs", "spark_udfs", "pyspark", "py4j"):
            problems.append(f"imports {module}: the core never imports the jobs, the Spark adapters or Spark")
            continue
        for target in targets(module, names):
            other = layer(target)
            if other is None or target == CORE:
                continue
            if target.startswith(SIMULATOR) and own != "simulator":
                problems.append(f"imports {target}: the simulator is not on the core's runtime path")
            elif rank(other) > rank(own) or (own != other and frozenset({own, other}) in INDEPENDENT):
                problems.append(f"imports {target}: layer {own!r} may not import layer {other!r}")
    assert problems == [], f"{name}: " + "; ".join(problems)


JOB_MODULES = modules("jobs") + modules("spark_udfs")


@pytest.mark.parametrize("name,path", JOB_MODULES, ids=[name for name, _ in JOB_MODULES])
def test_no_job_imports_the_simulator_at_run_time(name, path):
    problems = [
        f"imports {target} (in {function or 'the module body'})"
        for module, names, function in imports(path, name)
        for target in targets(module, names)
        if target.startswith(SIMULATOR) and (name, function) not in SIMULATOR_AT_BUILD_TIME
    ]
    assert problems == [], f"{name}: " + "; ".join(problems)


SOURCE_MODULES = modules("spark_udfs")


@pytest.mark.parametrize("name,path", SOURCE_MODULES, ids=[name for name, _ in SOURCE_MODULES])
def test_the_data_source_never_imports_the_jobs(name, path):
    """``spark_udfs`` sits under ``jobs``: the jobs use the ``kafka-log`` source, never the other way."""
    upward = [module for module, _, _ in imports(path, name) if module.split(".")[0] in ("jobs", "bench")]
    assert upward == [], f"{name} imports {', '.join(upward)}"


ALL_MODULES = CORE_MODULES + JOB_MODULES


@pytest.mark.parametrize("name,path", ALL_MODULES, ids=[name for name, _ in ALL_MODULES])
def test_no_module_imports_private_names_of_another(name, path):
    private = [
        f"{module}.{imported}"
        for module, names, _ in imports(path, name)
        if module.split(".")[0] in (CORE, "jobs", "spark_udfs")
        for imported in names
        if imported.startswith("_") and not imported.startswith("__")
    ]
    assert private == [], f"{name} imports private names: {', '.join(private)}"


@pytest.mark.parametrize("name,path", ALL_MODULES, ids=[name for name, _ in ALL_MODULES])
def test_no_module_reads_private_names_of_another_module(name, path):
    tree = ast.parse(path.read_text(), str(path))
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").split(".")[0] in (CORE, "jobs"))
        for alias in node.names
        if len(targets(node.module or "", (alias.name,))) > 1 or node.level
    }
    private = sorted(
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in aliases
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    )
    assert private == [], f"{name} reads private names of other modules: {', '.join(private)}"


def test_no_import_cycle_in_the_core():
    """Module-level imports or imports inside functions alike: no core module reaches itself again."""
    graph = {
        name: {
            target
            for module, names, _ in imports(path, name)
            for target in targets(module, names)
            if target.startswith(f"{CORE}.") and target != name
        }
        for name, path in CORE_MODULES
    }
    cycles = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


# Reads of files go through kafka_log_core/storage.py (the file-access seam): nowhere else on the runtime
# path are files listed, stat'ed, mapped or opened for reading. (Writes go through fsutil and
# log/segment_files.py; the simulator is not on the runtime path.)
STORAGE = f"{CORE}.storage"
LOCAL_ONLY = {
    "jobs.package": "`make dist` packs this checkout",
    "spark_udfs.packages": "Spark's Ivy settings on the machine that starts Spark",
    "kafka_log_core.numba_cache": "numba's cache beside the package's own source files",
}
_READS = {("os", "scandir"), ("os", "listdir"), ("os", "stat"), ("mmap", "mmap")}
_READ_METHODS = {"read_bytes", "read_text", "iterdir"}


def direct_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if (func.value.id, func.attr) in _READS:
                found.append(f"line {node.lineno}: {func.value.id}.{func.attr}()")
                continue
        if isinstance(func, ast.Attribute) and func.attr in _READ_METHODS:
            found.append(f"line {node.lineno}: .{func.attr}()")
        elif isinstance(func, ast.Name) and func.id == "open":
            mode = (
                node.args[1]
                if len(node.args) > 1
                else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            text = mode.value if isinstance(mode, ast.Constant) else "r"
            if "r" in str(text):
                found.append(f"line {node.lineno}: open(..., {text!r})")
    return found


RUNTIME_MODULES = [
    (name, path)
    for name, path in ALL_MODULES
    if name != STORAGE and not name.startswith(SIMULATOR) and name not in LOCAL_ONLY
]


@pytest.mark.parametrize("name,path", RUNTIME_MODULES, ids=[name for name, _ in RUNTIME_MODULES])
def test_files_are_read_only_through_the_storage_seam(name, path):
    assert direct_reads(path) == [], f"{name} reads files itself; use kafka_log_core.storage"
