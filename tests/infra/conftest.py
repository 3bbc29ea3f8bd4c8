"""Fixtures for the Pulumi program tests (no Pulumi CLI, no cloud: mocks only)."""

from __future__ import annotations

import pytest

from tests.infra.infra_harness import ProgramRun, run_program


@pytest.fixture(scope="session")
def program() -> ProgramRun:
    """The program with the minimal valid config (all defaults), run once."""
    return run_program()
