"""How many CPUs this process may use: what sizes its pools of model threads by default."""

from __future__ import annotations

import math
import os
from pathlib import Path

#: cgroup v2's CPU limit of the process's container: "<quota> <period>" in microseconds, or "max <period>"
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs the process may run on (its affinity: ``taskset``, cpusets), at most its container's CPU quota
    rounded up (cgroup v2 ``cpu.max``, e.g. ``docker run --cpus``), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 limit to read
        pass
    return max(1, cpus)
