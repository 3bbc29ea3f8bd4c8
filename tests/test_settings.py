"""Nested settings under flat names: every COGNIS_* variable and keyword argument reaches its component,
with argument > environment > default, and errors name the flat setting."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from cognis_memory.component_settings import ComponentSettings, component_type
from cognis_memory.config import Settings
from cognis_memory.stores.settings import PostgresSettings

pytestmark = pytest.mark.usefixtures("no_cognis_env")


def test_every_flat_name_is_one_setting_and_every_component_field_has_one() -> None:
    fields = list(Settings.flat_fields())
    assert len({f.flat for f in fields}) == len(fields)
    for top, info in Settings.model_fields.items():
        component = component_type(info)
        if component is not None:
            assert issubclass(component, ComponentSettings)
            assert all(sub.alias for sub in component.model_fields.values()), top


def test_a_component_field_reads_argument_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().postgres.port == 5432
    monkeypatch.setenv("COGNIS_POSTGRES_PORT", "6543")
    monkeypatch.setenv("cognis_postgres_db", "lower")  # any case, as before
    assert (Settings().postgres.port, Settings().postgres.db) == (6543, "lower")
    assert Settings(postgres_port=7000).postgres.port == 7000
    whole = Settings(postgres={"port": 7001})  # a component given as a dict merges with the environment
    assert (whole.postgres.port, whole.postgres.db) == (7001, "lower")
    assert Settings(postgres=PostgresSettings(dsn="x")).postgres.port == 5432  # given whole as an object: as built


def test_a_flat_name_that_is_also_a_component_is_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGNIS_TELEMETRY", "json")
    monkeypatch.setenv("COGNIS_LLM", "openai")
    settings = Settings(telemetry="text")
    assert (settings.telemetry.mode, settings.llm.kind) == ("text", "openai")


def test_json_settings_come_from_the_environment_and_errors_name_the_flat_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COGNIS_RECIPE_OVERRIDES", '{"context": false}')
    assert Settings().retrieval.recipe_overrides == {"context": False}
    monkeypatch.setenv("COGNIS_RECIPE_OVERRIDES", "{not json")
    with pytest.raises(ValueError, match="COGNIS_RECIPE_OVERRIDES: not valid JSON"):
        Settings()
    monkeypatch.delenv("COGNIS_RECIPE_OVERRIDES")
    monkeypatch.setenv("COGNIS_JOB_LEASE_S", "soon")
    with pytest.raises(ValidationError, match=r"jobs\.job_lease_s"):
        Settings()


def test_replace_sets_flat_names_without_touching_the_rest() -> None:
    settings = Settings(postgres_db="kept", run_worker=True)
    copy = settings.replace(run_worker=False, postgres_port=1)
    assert (copy.jobs.run_worker, copy.postgres.port, copy.postgres.db) == (False, 1, "kept")
    assert (settings.jobs.run_worker, settings.postgres.port) == (True, 5432)


def test_the_benchmarks_read_a_setting_by_its_flat_name_in_nested_and_flat_settings() -> None:
    """The benchmarks run a baseline runtime from before nested settings too (--baseline-ref)."""
    from cognis_dev.bench_common import setting

    s = Settings(embedding_dim_short=64, recipe="rrf")
    assert setting(s, "embedding_dim_short") == 64 == s.encoder.dim_short
    assert setting(s, "recipe") == "rrf" and setting(s, "store") == s.store

    class FlatSettings:  # what a runtime before nested settings had: every setting a field of Settings
        model_fields = {"embedding_dim_short": None}
        embedding_dim_short = 96

    assert setting(FlatSettings(), "embedding_dim_short") == 96


def test_loading_the_configuration_imports_no_store_client_library() -> None:
    """``config.py`` composes the settings classes of the stores, which may live in the store's own module:
    such a module imports its client library inside its functions, so reading the configuration (every CLI
    command, the Lambda handler's cold start) does not load PostgreSQL, OpenSearch, AWS or Redis clients."""
    clients = ("psycopg", "psycopg_pool", "opensearchpy", "boto3", "botocore", "redis")
    code = f"import sys, cognis_memory.config; print(sorted(m for m in {clients!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
