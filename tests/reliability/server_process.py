"""A real ``cognis-memory serve`` subprocess on 127.0.0.1 (shared with scripts/load_test.py)."""

from __future__ import annotations

from scripts.load_test import ServeProcess, free_port

__all__ = ["ServeProcess", "free_port"]
