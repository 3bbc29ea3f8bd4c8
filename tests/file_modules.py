"""Load a Python file that is no importable module (a script in scripts/, an example) as one, for tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path) -> ModuleType:
    """``path`` executed as the module ``name``, registered in ``sys.modules`` first: dataclasses and
    pickling look a class's module up by name."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
