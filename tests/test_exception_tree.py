"""One exception tree: every exception class the runtime defines derives from ``CognisError``, and the API
answers the service's errors by their class.

The walk reads every module of ``runtime/cognis_memory`` with ``ast`` for its class definitions, imports
the module and asks ``inspect`` whether each class is an exception, so a class that is one only through
a base defined elsewhere is found too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cognis_memory import errors
from cognis_memory.api.errors import STATUS_BY_ERROR, install_error_handlers
from cognis_memory.errors import CognisError, DependencyUnavailableError, InvalidInputError

PACKAGE = Path(errors.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _defined_classes(path: Path) -> list[str]:
    """The qualified names of the classes defined in ``path`` (nested ones as ``Outer.Inner``), not those
    defined inside a function."""
    names: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                names.append(prefix + node.name)
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.If, ast.Try)):  # classes defined under a condition
                visit(node.body, prefix)
                visit(node.orelse, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body, "")
    return names


def outside_the_tree(module: object, qualnames: list[str]) -> list[str]:
    """The exception classes among ``qualnames`` of ``module`` that do not derive from ``CognisError``."""
    found = []
    for qualname in qualnames:
        cls = _resolve(module, qualname)
        if inspect.isclass(cls) and issubclass(cls, BaseException) and not issubclass(cls, CognisError):
            found.append(f"{getattr(module, '__name__', module)}.{qualname}{tuple(b.__name__ for b in cls.__bases__)}")
    return found


def _runtime_exception_classes() -> tuple[int, list[str], list[str]]:
    """(exception classes seen, those outside the tree, modules that define classes)."""
    seen, outside, modules = 0, [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        qualnames = _defined_classes(path)
        if not qualnames:
            continue
        module = importlib.import_module(_module_name(path))
        modules.append(module.__name__)
        outside += outside_the_tree(module, qualnames)
        seen += sum(
            1
            for q in qualnames
            if inspect.isclass(c := _resolve(module, q)) and issubclass(c, BaseException)  # type: ignore[arg-type]
        )
    return seen, outside, modules


def _resolve(module: object, qualname: str) -> object:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_exception_class_of_the_runtime_derives_from_cognis_error() -> None:
    seen, outside, modules = _runtime_exception_classes()
    # the walk reaches the whole package: the stores' migrations, the providers and the client among them
    assert {
        "cognis_memory.stores.migrations.sqlite",
        "cognis_memory.providers.base",
        "cognis_memory.client.errors",
    } <= set(modules)
    assert seen >= 25, f"the walk found only {seen} exception classes"
    assert not outside, (
        "exception classes outside the CognisError tree (add CognisError to their bases):\n" + "\n".join(outside)
    )


def test_the_walk_finds_a_class_outside_the_tree() -> None:
    """The check itself: an exception class with only a built-in base, directly or through another, is
    reported; one in the tree (also with a built-in base kept for callers) is not."""

    class Rogue(ValueError):
        pass

    class RogueChild(Rogue):
        pass

    class Kept(CognisError, ValueError):
        pass

    class Holder:
        pass

    for cls in (Rogue, RogueChild, Kept):
        setattr(Holder, cls.__name__, cls)
    assert outside_the_tree(Holder, ["Rogue", "RogueChild", "Kept"]) == [
        "Holder.Rogue('ValueError',)",
        "Holder.RogueChild('Rogue',)",
    ]


def _raising_app(exc: Exception) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/raise")
    async def _raise() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize("mapped", sorted(STATUS_BY_ERROR, key=lambda c: c.__name__))
def test_the_api_answers_a_subclass_of_a_mapped_error_as_its_base(mapped: type[CognisError]) -> None:
    """The body is chosen by class: a subclass the mapping does not list (here one made up for the test)
    gets its nearest listed base's status and code, whatever its message says."""
    sub = type(f"Special{mapped.__name__}", (mapped,), {})
    exc = sub("field", "says nothing of its kind") if issubclass(mapped, InvalidInputError) else sub("redis")
    answer = _raising_app(exc).get("/raise")
    status, code = STATUS_BY_ERROR[mapped]
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    if mapped is InvalidInputError:
        assert answer.json()["error"] == {
            "code": "invalid_input",
            "message": "field: says nothing of its kind",
            "field": "field",
        }
    if mapped is DependencyUnavailableError:
        assert answer.headers["retry-after"] == "2"


def test_an_error_the_mapping_does_not_list_is_not_answered_as_one() -> None:
    """A CognisError outside the mapping (a configuration error, an LLM's unusable answer) is a 500,
    not a 4xx chosen from its message."""
    answer = _raising_app(errors.SettingError("recipe", "not found")).get("/raise")
    assert answer.status_code == 500
