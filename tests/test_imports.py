"""The import graph between the project's files has no cycle, and its layers import one way only
(docs/architecture.md section 1).

Edges are the imports of every file of `gpu_hamlet/` and `cpu_fallback/` (type-only imports
included: a cycle of them still ties the two files together), resolved to files. For cycles
between files only module-level imports count; the layer rules count imports inside functions
too (the lazy choice of a backend is the one import of a backend by the engine)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gpu_hamlet", "cpu_fallback")


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_level(nodes: list[ast.stmt]):
    """Import statements at module level, in `if` blocks (TYPE_CHECKING) and `try` blocks too."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            yield from _module_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body + node.orelse + node.finalbody)


def _everywhere(nodes: list[ast.stmt]):
    """Every import statement, inside functions and classes too."""
    for tree in nodes:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def import_graph(lazy: bool = False) -> dict[Path, set[Path]]:
    """File -> the project files it imports: at module level, or anywhere with `lazy`."""
    find = _everywhere if lazy else _module_level
    graph: dict[Path, set[Path]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            here = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if here.endswith(".__init__"):
                here = here[: -len(".__init__")]
            targets: set[Path] = set()
            tree = ast.parse(path.read_text())
            for node in find(tree.body):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    parent = here if path.name == "__init__.py" else here.rpartition(".")[0]
                    for _ in range(max(node.level - 1, 0)):
                        parent = parent.rpartition(".")[0]
                    base = node.module or ""
                    if node.level:
                        base = f"{parent}.{base}" if base else parent
                    # `from pkg import mod` names a module when pkg/mod.py exists.
                    names = [f"{base}.{a.name}" for a in node.names] + [base]
                for name in names:
                    if name.split(".")[0] not in PACKAGES:
                        continue
                    target = _module_file(name)
                    if target is not None and target != path:
                        targets.add(target)
                        break  # the first that resolves: the submodule, else the package
            graph[path] = targets
    return graph


def cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []

    def visit(v: Path) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_files():
    graph = import_graph()
    assert len(graph) > 30 and sum(map(len, graph.values())) > 50  # the graph was read
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(
        " <-> ".join(str(p.relative_to(ROOT)) for p in c) for c in found
    )


def test_a_cycle_is_found():
    a, b, c = Path("a.py"), Path("b.py"), Path("c.py")
    assert cycles({a: {b}, b: {c}, c: set()}) == []
    assert sorted(map(sorted, cycles({a: {b}, b: {c}, c: {a}}))) == [[a, b, c]]


#: Each layer and the layers its files may import. `base` is the leaf modules every layer uses.
LAYERS: dict[str, set[str]] = {
    "base": set(),
    "query": {"base"},
    "core": {"base"},
    "cpu_fallback": {"core", "base"},
    "kernels": {"core", "base"},
    "engine": {"query", "core", "base"},
    "entry": {"engine", "query", "core", "base"},
}
#: The one place the engine chooses (and so imports) a backend.
CHOOSER = ROOT / "gpu_hamlet" / "engine" / "backend.py"


def layer_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    if parts[0] == "cpu_fallback":
        return "cpu_fallback"
    if parts[1] in ("query", "core", "engine", "kernels"):
        return parts[1]
    if parts[1] in ("errors.py", "devices.py", "host_threads.py", "names.py"):
        return "base"
    return "entry"  # the package's face: __init__, cli, spark/, demo, datagen, kernel_cache


def test_layers_import_one_way():
    graph = import_graph(lazy=True)
    assert {layer_of(p) for p in graph} == set(LAYERS)  # every layer has files
    wrong = [
        f"{a.relative_to(ROOT)} ({layer_of(a)}) imports {b.relative_to(ROOT)} ({layer_of(b)})"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b) != layer_of(a)
        and layer_of(b) not in LAYERS[layer_of(a)]
        and not (a == CHOOSER and layer_of(b) in ("cpu_fallback", "kernels"))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_engine_imports_a_backend_only_lazily():
    eager = import_graph()[CHOOSER]
    assert not {layer_of(b) for b in eager} & {"cpu_fallback", "kernels"}
    assert {"cpu_fallback", "kernels"} <= {layer_of(b) for b in import_graph(lazy=True)[CHOOSER]}


def test_the_engine_and_command_line_import_without_pyspark():
    """Only the Spark job needs pyspark at import: the engine and the command line (which reads
    and writes through Spark lazily) import without it, as on the GPU machines, which have none
    (BENCHMARKS.md, GPU kernels)."""
    code = (
        "import sys\n"
        "class NoSpark:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pyspark':\n"
        "            raise ImportError('pyspark hidden')\n"
        "sys.meta_path.insert(0, NoSpark())\n"
        "import gpu_hamlet, gpu_hamlet.cli\n"
        "assert 'pyspark' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
