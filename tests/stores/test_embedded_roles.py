"""The embedded store's roles share only the base's members, and the base's docstring names them: each role
module (:mod:`cognis_memory.stores.embedded`) uses its own members and those of ``EmbeddedBase``, never another
role's, and imports no private name from another module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cognis_memory.stores.embedded import base

EMBEDDED = Path(base.__file__).parent
ROLES = ("messages", "jobs", "api_keys", "memories", "search")


def _members(path: Path) -> tuple[set[str], set[str], set[str]]:
    """The methods a module's classes define, and the ``self`` attributes it reads and assigns."""
    methods, read, assigned = set(), set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            methods |= {i.name for i in node.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)}
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (assigned if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return methods, read, assigned


def _documented() -> dict[str, set[str]]:
    """Each role's line of ``EmbeddedBase``'s docstring (``* :mod:`.role`: ``_a``, ``_b``...``), as names."""
    doc = base.EmbeddedBase.__doc__ or ""
    lines = re.findall(r"^\s*\* :mod:`\.(\w+)`:(.*(?:\n\s{6,}``.*)*)", doc, re.M)
    return {role: set(re.findall(r"``(\w+)``", names)) for role, names in lines}


def test_each_role_uses_only_its_own_and_the_bases_members_as_documented() -> None:
    base_methods, _, base_assigned = _members(EMBEDDED / "base.py")
    shared = base_methods | base_assigned
    documented = _documented()
    assert set(documented) == set(ROLES), documented
    for role in ROLES:
        methods, read, assigned = _members(EMBEDDED / f"{role}.py")
        elsewhere = read - methods - assigned - shared
        assert not elsewhere, f"{role}.py uses {sorted(elsewhere)}, defined by neither it nor the base"
        uses = {name for name in (read | assigned) - methods if name.startswith("_") and name in shared}
        assert uses == documented[role], f"{role}.py shares {sorted(uses)} with the base; its docstring line differs"


def test_no_module_of_the_embedded_store_imports_a_private_name() -> None:
    for path in sorted(EMBEDDED.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"]
                assert not private, f"{path.name} imports {private} from {node.module}"
