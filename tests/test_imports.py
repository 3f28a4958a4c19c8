"""The import graph between the project's files has no cycle (docs/architecture.md section 1).

Edges are the module-level imports of every file of `gpu_hamlet/` and `cpu_fallback/` (type-only
imports included: a cycle of them still ties the two files together), resolved to files; imports
inside functions (the lazy choice of a backend) are not edges."""

from __future__ import annotations

import ast
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


def import_graph() -> dict[Path, set[Path]]:
    graph: dict[Path, set[Path]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            here = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if here.endswith(".__init__"):
                here = here[: -len(".__init__")]
            targets: set[Path] = set()
            tree = ast.parse(path.read_text())
            for node in _module_level(tree.body):
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
