"""The ``text`` telemetry mode: a request's record as one line a person reads on a terminal.

The line carries every field of the JSON record, most useful first::

    10:42:07.311 memory_retrieval 38.2ms request_id=4f2a tenant_id=demo user_id=demo-user results_final=3 ...
      | query_analysis 0.1 · embed_query 12.3 · vector_short 0.4 · ...

(one physical line; shown wrapped here). Values that are not plain words are JSON-quoted, so a
value can never break the line in two.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

#: Fields shown in the head of the line (or not at all), not among the key=value pairs.
_HEAD = frozenset({"event", "ts", "duration_ms", "stage_durations", "error", "degraded"})


def request_line(record: dict[str, Any]) -> str:
    """One line for a request record (see :meth:`Telemetry.log_request`)."""
    parts = [_clock(record.get("ts")), str(record.get("event", "request")), f"{record.get('duration_ms', 0):.1f}ms"]
    if record.get("error"):
        parts.append("ERROR")
    if record.get("degraded"):
        parts.append("degraded=" + ",".join(map(str, record["degraded"])))
    parts += [f"{k}={_value(v)}" for k, v in record.items() if k not in _HEAD]
    stages = record.get("stage_durations") or {}
    if stages:
        parts.append("| " + " · ".join(f"{k.removesuffix('_ms')} {v:.1f}" for k, v in stages.items()))
    return " ".join(parts)


def error_line(record: dict[str, Any]) -> str:
    """One line for an error record (see :meth:`Telemetry.log_error`)."""
    rest = " ".join(f"{k}={_value(v)}" for k, v in record.items() if k not in ("event", "ts"))
    return f"{_clock(record.get('ts'))} ERROR {record.get('event', 'error')} {rest}".rstrip()


def _clock(ts: Any) -> str:
    try:
        return datetime.fromisoformat(str(ts)).strftime("%H:%M:%S.%f")[:-3]
    except ValueError:
        return "--:--:--.---"


def _value(v: Any) -> str:
    if isinstance(v, str) and v and v.isprintable() and not any(c in v for c in ' ="\\|'):
        return v
    if isinstance(v, float):
        return f"{v:g}"
    return json.dumps(v, default=str, separators=(",", ":"))  # ASCII: no raw line separators
