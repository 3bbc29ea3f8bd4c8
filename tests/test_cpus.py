"""The CPUs a process may use (the default count of model threads): its affinity, at most its container's quota."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from cognis_memory.cpus import available_cpus


def test_a_container_quota_caps_the_count_rounded_up(tmp_path) -> None:
    cpu_max = tmp_path / "cpu.max"
    unlimited = available_cpus(tmp_path / "absent")
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cpu_max) == unlimited
    cpu_max.write_text("50000 100000\n")  # half a CPU: still one thread
    assert available_cpus(cpu_max) == 1
    cpu_max.write_text("150000 100000\n")
    assert available_cpus(cpu_max) == min(unlimited, 2)
    cpu_max.write_text("not a quota\n")
    assert available_cpus(cpu_max) == unlimited


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_a_process_pinned_to_one_cpu_counts_one() -> None:
    code = "from cognis_memory.cpus import available_cpus; print(available_cpus())"
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
