"""Physical names that carry the stack, so stacks in one account and region never collide.

AWS names have per-service rules (length, characters, case). :func:`physical_name` builds
``<prefix>-<suffix>`` in lower case with only ``[a-z0-9-]``, and when the result is too long
shortens the prefix and appends a short hash of the full name, so two long stack names that
share a beginning still get different names.
"""

from __future__ import annotations

import hashlib
import re


def slug(text: str) -> str:
    """Lower case, runs of anything but ``[a-z0-9]`` turned into one hyphen, no edge hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def physical_name(prefix: str, suffix: str, *, max_len: int) -> str:
    """``<prefix>-<suffix>`` (slugged) of at most ``max_len`` characters, unique per full name."""
    full = slug(f"{prefix}-{suffix}")
    if len(full) <= max_len:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:6]
    tail = f"-{slug(suffix)}-{digest}"
    keep = max_len - len(tail)
    if keep < 1:
        raise ValueError(f"cannot fit a name for {suffix!r} in {max_len} characters")
    return f"{slug(prefix)[:keep].rstrip('-')}{tail}"
