"""The runtime's imports form no circle, and every one of them is written as an import statement.

The graph is read from the code (``ast``): every ``import`` and ``from ... import`` of every module of
``runtime/cognis_memory``, at the top, inside functions and under ``TYPE_CHECKING`` alike, so a registry's
loader functions count as arrows. A circle fails the test naming its modules in order. Registries name
their entries with imports inside small functions (``providers/registry.py``, ``stores/registry.py``,
``retrieval/registry.py``, ``providers/embedding_models.py``), never with strings loaded by ``importlib``:
what a string names is not an arrow here or in any tool, and hid three circles before.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parents[1] / "runtime"
PACKAGE = "cognis_memory"

#: Each registry module and its tables of ``name -> loader``.
REGISTRIES = {
    "cognis_memory.providers.registry": ("EMBEDDERS", "RERANKERS", "LLMS"),
    "cognis_memory.stores.registry": ("STORES",),
    "cognis_memory.retrieval.registry": ("RETRIEVAL_STAGES",),
    "cognis_memory.providers.embedding_models": ("EMBEDDING_MODELS",),
}


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The modules of ``modules`` that module ``name`` imports anywhere in its code."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            # ``from package import module`` imports that module; ``from module import name``, the module
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # ``import a.b.c`` of a name inside a module
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = _modules(root, package)
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle of each group of modules that import each other (Tarjan's strongly connected
    components), as the modules in import order with the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_circle(graph, group) for group in groups]


def _one_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path inside ``group`` from its first module back to it (breadth first: the shortest)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no circle through {start}")  # a strongly connected group always has one


def test_the_runtime_imports_form_no_circle() -> None:
    graph = import_graph(RUNTIME, PACKAGE)
    assert len(graph) > 100 and "cognis_memory.stores.embedded" in graph["cognis_memory.stores.registry"]
    found = [" -> ".join(circle) for circle in circles(graph)]
    assert found == [], "import circles:\n" + "\n".join(found)


def test_a_circle_through_a_function_level_import_is_found_and_named(tmp_path: Path) -> None:
    """The check sees what the registries' loaders import: a registry that imports a module inside a function,
    a module that imports the registry back."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .impl import Impl\n")
    (pkg / "registry.py").write_text("def _impl():\n    from .sub import Impl\n\n    return Impl\n")
    (pkg / "sub" / "impl.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..registry import _impl\n\nclass Impl: ...\n"
    )
    (pkg / "plain.py").write_text("import pkg.sub.impl\nfrom pkg import registry\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.plain"] == {"pkg.sub.impl", "pkg.registry"}
    assert circles(graph) == [["pkg.registry", "pkg.sub", "pkg.sub.impl", "pkg.registry"]]


def test_no_runtime_module_imports_by_a_string() -> None:
    """``importlib.import_module`` and ``__import__`` load what no import statement names."""
    found = []
    for name, path in _modules(RUNTIME, PACKAGE).items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            called = node.func if isinstance(node, ast.Call) else None
            callee = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
            if callee in {"import_module", "__import__"}:
                found.append(f"{name}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("registry", sorted(REGISTRIES))
def test_each_registry_loads_every_entry_in_a_fresh_interpreter(registry: str) -> None:
    """The registry module alone imports no client library, and every entry loads (its module imported first
    through the registry, as a chosen kind is), in a fresh interpreter where nothing else was imported."""
    code = f"""
import importlib, json, sys
clients = ("opensearchpy", "psycopg", "psycopg_pool", "redis", "boto3", "botocore", "torch", "onnxruntime", "faiss")
registry = importlib.import_module({registry!r})
before = sorted(m for m in clients if m in sys.modules)
loaded = {{}}
for table in {list(REGISTRIES[registry])!r}:
    for kind, entry in getattr(registry, table).items():
        if hasattr(entry, "sections"):  # a store kind
            loaded[f"{{table}}.{{kind}}"] = callable(entry.load())
        elif hasattr(entry, "files"):  # an embedding model: its files module names it
            loaded[f"{{table}}.{{kind}}"] = bool(entry.name())
        else:
            loaded[f"{{table}}.{{kind}}"] = callable(entry())
print(json.dumps({{"clients": before, "loaded": loaded}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["clients"] == []
    assert answer["loaded"] and all(answer["loaded"].values()), answer["loaded"]
