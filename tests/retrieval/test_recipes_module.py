"""The recipes' module moved from ``retrieval/config.py`` to ``retrieval/recipes.py``; the old module path
stays importable for a release, warning on import and handing on the same objects."""

from __future__ import annotations

import importlib
import sys

import pytest

from cognis_memory.retrieval import recipes


def test_old_module_warns_and_hands_on_the_same_names():
    sys.modules.pop("cognis_memory.retrieval.config", None)  # so the import runs the module again
    with pytest.warns(DeprecationWarning, match=r"cognis_memory\.retrieval\.recipes"):
        old = importlib.import_module("cognis_memory.retrieval.config")
    assert old.__all__, "the alias module hands on nothing"
    for name in old.__all__:
        assert getattr(old, name) is getattr(recipes, name), name
    # every public name the recipes' module defines (its classes, functions and constants)
    defined = {
        n
        for n, v in vars(recipes).items()
        if not n.startswith("_") and (getattr(v, "__module__", None) == recipes.__name__ or n.isupper())
    }
    assert defined == set(old.__all__)
