"""Is the configured Bedrock model still usable? Asked once when the service starts.

Bedrock reports each model's lifecycle in ``GetFoundationModel`` (``modelDetails.modelLifecycle``:
``status`` ACTIVE or LEGACY, and the legacy and end-of-life times when known). A Legacy model still
answers until its end-of-life date; after it every call fails, so every extraction job would
dead-letter. :class:`BedrockModelLifecycleCheck` turns the answer into a :class:`ModelLifecycle`
the service logs at start and shows in ``GET /ready`` (``llm``). It never raises: a check that
cannot run (no permission, no network, an unknown model id) says so in ``status="UNKNOWN"`` with
the reason, and the service starts all the same.

An inference profile id (``us.amazon.nova-2-lite-v1:0``) is checked as its foundation model
(:func:`~cognis_memory.providers.bedrock_models.foundation_model_id`); the task role needs
``bedrock:GetFoundationModel`` on that model (the stack grants it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from .bedrock_models import ACTIVE, LEGACY, foundation_model_id
from .settings import LLMSettings

log = logging.getLogger(__name__)

#: The states :class:`ModelLifecycle` reports: Bedrock's two, past end of life, and "could not tell".
END_OF_LIFE, UNKNOWN = "END_OF_LIFE", "UNKNOWN"


@dataclass(frozen=True, slots=True)
class ModelLifecycle:
    """What the check found about one model id."""

    model_id: str
    foundation_model_id: str
    status: str
    legacy_time: str | None = None
    end_of_life_time: str | None = None
    detail: str = ""

    @property
    def usable(self) -> bool:
        """False only when the model is known to be past its end of life."""
        return self.status != END_OF_LIFE

    @property
    def warning(self) -> bool:
        return self.status != ACTIVE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return str(value)


class BedrockModelLifecycleCheck:
    """``GetFoundationModel`` on the foundation model of ``model_id`` (a short timeout, one attempt).

    ``client`` is a boto3 ``bedrock`` (control plane) client; by default one is built for ``region``.
    ``clock`` gives "now" for the end-of-life comparison.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        timeout_s: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.model_id = model_id
        self.foundation_model_id = foundation_model_id(model_id)
        self._client = client
        self._region = region
        self._timeout_s = timeout_s
        self._clock = clock

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, aws_region: str | None) -> BedrockModelLifecycleCheck | None:
        """The check of the configured Bedrock model in ``aws_region``; None unless ``llm`` is ``bedrock``."""
        if settings.kind != "bedrock":
            return None
        return cls(str(settings.bedrock_model_id), region=aws_region)

    def _bedrock(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "bedrock",
                region_name=self._region,
                config=Config(
                    connect_timeout=self._timeout_s,
                    read_timeout=self._timeout_s,
                    retries={"mode": "standard", "total_max_attempts": 1},
                ),
            )
        return self._client

    def _result(self, status: str, detail: str, **times: str | None) -> ModelLifecycle:
        return ModelLifecycle(self.model_id, self.foundation_model_id, status, detail=detail, **times)

    def check(self) -> ModelLifecycle:
        """The model's lifecycle; never raises."""
        try:
            response = self._bedrock().get_foundation_model(modelIdentifier=self.foundation_model_id)
        except Exception as exc:  # the check informs, it never stops the service
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            message = getattr(exc, "response", {}).get("Error", {}).get("Message", str(exc))
            if code == "ResourceNotFoundException":
                detail = (
                    f"Bedrock does not know {self.foundation_model_id} in this Region: a wrong model id, or a model "
                    f"past its end of life ({message})"
                )
            elif code == "AccessDeniedException":
                detail = f"not permitted to call bedrock:GetFoundationModel on {self.foundation_model_id} ({message})"
            else:
                detail = f"GetFoundationModel failed: {code}: {message}"
            return self._result(UNKNOWN, detail)
        lifecycle = (response.get("modelDetails") or {}).get("modelLifecycle") or {}
        status = str(lifecycle.get("status") or UNKNOWN)
        legacy, eol = lifecycle.get("legacyTime"), lifecycle.get("endOfLifeTime")
        times = {"legacy_time": _iso(legacy), "end_of_life_time": _iso(eol)}
        if isinstance(eol, datetime) and eol <= self._clock():
            return self._result(
                END_OF_LIFE, f"end of life since {times['end_of_life_time']}: every call fails", **times
            )
        if status == LEGACY:
            when = f" on {times['end_of_life_time']}" if times["end_of_life_time"] else ""
            return self._result(LEGACY, f"Legacy: reaches end of life{when}; move to an Active model", **times)
        if status == ACTIVE:
            return self._result(ACTIVE, "Active", **times)
        return self._result(UNKNOWN, f"unexpected lifecycle status {status!r}", **times)


def log_lifecycle(result: ModelLifecycle) -> None:
    """One log line: info for an Active model, a warning for anything else."""
    level = logging.INFO if not result.warning else logging.WARNING
    log.log(
        level,
        "bedrock model %s (%s): %s: %s",
        result.model_id,
        result.foundation_model_id,
        result.status,
        result.detail,
    )
