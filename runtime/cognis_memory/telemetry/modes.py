"""Where the per-request telemetry goes, chosen to fit the place the process runs.

* ``emf``: the JSON log line plus CloudWatch EMF metric lines (CloudWatch Logs turns those into
  metrics). What ECS and Lambda want.
* ``json``: the JSON log line only (a log shipper that is not CloudWatch, a file, a pipe).
* ``text``: one concise human line per request, with the same fields (a terminal).
* ``off``: no request lines and no metrics; unexpected errors are still written (as JSON).
* ``auto`` (the default): ``emf`` where CloudWatch reads stdout (an ECS task, a Lambda function:
  recognised by the variables those runtimes set), ``text`` on a terminal, ``json`` otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Literal, get_args

from ..errors import SettingError

#: The setting (``COGNIS_TELEMETRY``) and what ``auto`` resolves to. Import-light: the infra reads it.
TelemetryMode = Literal["auto", "emf", "json", "text", "off"]
Mode = Literal["emf", "json", "text", "off"]
MODES: tuple[str, ...] = get_args(TelemetryMode)

#: Set by the ECS container agent in every task on Fargate and EC2 (task metadata endpoint v4).
ECS_MARKER = "ECS_CONTAINER_METADATA_URI_V4"
#: Set by the Lambda runtime in every function's environment.
LAMBDA_MARKER = "AWS_LAMBDA_FUNCTION_NAME"


def resolve_mode(
    setting: TelemetryMode | str, *, stream: IO[str] | None = None, environ: Mapping[str, str] | None = None
) -> Mode:
    """The concrete mode for ``setting``; ``auto`` looks at ``environ`` (default: ``os.environ``) and
    whether ``stream`` (where the lines go) is a terminal."""
    if setting not in MODES:
        raise SettingError("telemetry", f"unknown mode {setting!r}; one of {', '.join(MODES)}")
    if setting != "auto":
        return setting  # type: ignore[return-value]
    env = os.environ if environ is None else environ
    if env.get(ECS_MARKER) or env.get(LAMBDA_MARKER):
        return "emf"
    return "text" if _is_terminal(stream) else "json"


def _is_terminal(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
