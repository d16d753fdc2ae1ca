"""The layout docs/architecture.md describes, held: private by default, no reaching into another
module's private names, no module too long to read."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "parquet_bloom"
GENERATED = SRC / "_thrift"
# Modules a user may import: the API (docs/api.md), the command and its entry point.
PUBLIC = {
    "parquet_bloom",
    "parquet_bloom.errors",
    "parquet_bloom.kernels",
    "parquet_bloom.testing",
    "parquet_bloom.cli",
    "parquet_bloom.__main__",
    "parquet_bloom.spark",
    "parquet_bloom.hudi",
    "parquet_bloom.iceberg",
    "parquet_bloom.delta",
    "parquet_bloom.paimon",
    "parquet_bloom.clickhouse",
    "parquet_bloom.index",
}
MAX_LINES = 900
COMPILED = {"parquet_bloom._kernels"}  # the C extension: imports nothing of ours
GENERATED_MODULE = "parquet_bloom._thrift"  # generated code: imports only itself


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        if GENERATED in path.parents:
            continue
        parts = ["parquet_bloom", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__main__" for part in module.split(".")[1:])


def test_every_module_is_public_api_or_private() -> None:
    unexpected = [m for m in _modules() if not _is_private(m) and m not in PUBLIC]
    assert unexpected == []


def test_no_module_imports_another_modules_private_names() -> None:
    offences = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}  # local name -> the parquet_bloom module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("parquet_bloom"):
                for name in node.names:
                    target = f"{node.module}.{name.name}"
                    if target in _modules() or target == "parquet_bloom._kernels":
                        aliases[name.asname or name.name] = target
                    elif name.name.startswith("_") and not name.name.startswith("__"):
                        offences.append(f"{module}: from {node.module} import {name.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                offences.append(f"{module}: {node.value.id}.{node.attr}")
    assert offences == []


def test_no_module_is_over_the_length_limit() -> None:
    lengths = {m: len(p.read_text().splitlines()) for m, p in _modules().items()}
    assert {m: n for m, n in lengths.items() if n > MAX_LINES} == {}


def _executed(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return nodes


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The parquet_bloom modules ``module`` imports when it runs, at the top or in a function:
    ``import x``, ``from x import y`` (``y`` itself when it is a module, else ``x``) and relative
    imports, resolved. Imports under ``if TYPE_CHECKING:`` never run (annotations are strings
    here), so they are no edge; neither is the generated Thrift code nor the compiled kernels,
    which import nothing of ours."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _executed(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            names = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if (
                name in COMPILED
                or name == GENERATED_MODULE
                or name.startswith(GENERATED_MODULE + ".")
            ):
                continue
            while name and name not in known:  # a name in a module: the module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, set(modules)) for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: one per strongly connected component of more than one
    module (Tarjan's algorithm), each listed as the modules of that component, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_finder_finds_circles_and_only_them() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": set(),
        "x": {"y"},
        "y": {"x"},  # x <-> y
        "z": {"a", "e"},  # reaches a circle, is in none
    }
    assert _cycles(graph) == [["a", "b", "c"], ["x", "y"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_import_graph_reads_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text(
        "import pkg.top\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.sub\n"
        "def f():\n    from ..other import thing\n    from .. import top\n"
    )
    (package / "top.py").write_text("from pkg.sub.leaf import f\nfrom pkg import other, sub\n")
    (package / "other.py").write_text("thing = 1\n")
    known = {"pkg", "pkg.sub", "pkg.sub.leaf", "pkg.top", "pkg.other"}
    leaf = _imports("pkg.sub.leaf", package / "sub" / "leaf.py", known)
    assert leaf == {"pkg.top", "pkg.other"}
    assert _imports("pkg.sub", package / "sub" / "__init__.py", known) == {"pkg.sub.leaf"}
    assert _imports("pkg.top", package / "top.py", known) == {
        "pkg.sub.leaf",
        "pkg.other",
        "pkg.sub",
    }


def test_no_import_circles() -> None:
    cycles = _cycles(_import_graph())
    assert not cycles, "import circles, each its modules:\n" + "\n".join(map(", ".join, cycles))
