"""Building the two OpenAI-compatible servers from llama-cpp-python's source package, once, into the cache.

* :func:`build_llama_cpp_python`: ``pip wheel --no-deps`` of the source package (it ships no binary
  wheel; ~14 min on 2 cores) into ``<cache>/wheels``, then a virtualenv ``<cache>/llama-venv`` with
  that wheel and its ``[server]`` extra, so that its fastapi/pydantic pins never touch the project's .venv.
* :func:`build_llama_server`: llama.cpp's own C++ ``llama-server``, built with cmake from the
  ``vendor/llama.cpp`` directory of the same source package (only that target, ``-j2``, static).

Both use the same ggml flags (AVX2/FMA/F16C, no ``-march=native``, so the binaries run on any x86-64
machine of that level) and are idempotent: a JSON stamp next to each result says what was built, and
a second call only checks it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..local_servers._base import ServerError, ServerUnavailable, tail
from .cache import Log, atomic_write_json, cache_dir, log_stderr, read_json

__all__ = [
    "GGML_CMAKE_FLAGS",
    "LLAMA_CPP_PYTHON_VERSION",
    "BuildError",
    "BuildUnavailable",
    "build_llama_cpp_python",
    "build_llama_server",
    "llama_cpp_python_status",
    "llama_server_status",
    "llama_venv_python",
    "llama_server_binary",
]


LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
SDIST_SIZE = 76_589_250
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
#: ggml's CPU flags for both builds: portable x86-64-v3 code instead of -march=native.
GGML_CMAKE_FLAGS = ("-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON")
#: llama-server alone, static, without the web UI (its prebuilt assets would be downloaded from a model
#: hub, which this project cannot reach) and without OpenSSL (it only listens on 127.0.0.1).
LLAMA_SERVER_CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    *GGML_CMAKE_FLAGS,
)
BUILD_JOBS = 2


class BuildError(ServerError):
    """A build step failed; the message carries the command and its log tail."""


class BuildUnavailable(BuildError, ServerUnavailable):
    """A build tool is missing (cmake, a C++ compiler): the message says what to install."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _run(
    cmd: Sequence[str],
    *,
    what: str,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 7200,
) -> None:
    """Run a build command with its output appended to ``log_path``; BuildError with the tail on failure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        try:
            res = subprocess.run(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                timeout=timeout,
            )
        except FileNotFoundError as e:
            raise BuildUnavailable(f"{what}: {cmd[0]} not found ({e})") from e
        except subprocess.TimeoutExpired as e:
            raise BuildError(f"{what} timed out after {timeout:.0f}s; log {log_path}:\n{tail(log_path, 30)}") from e
    if res.returncode != 0:
        raise BuildError(
            f"{what} failed (exit {res.returncode}): {' '.join(cmd)}\nlog {log_path}:\n{tail(log_path, 40)}"
        )


def fetch_sdist(*, log: Log = log_stderr) -> Path:
    """llama-cpp-python's source package in ``<cache>/src`` (pip download, pinned sha256)."""
    src = cache_dir() / "src"
    path = src / SDIST_NAME
    if path.is_file() and path.stat().st_size == SDIST_SIZE and _sha256(path) == SDIST_SHA256:
        return path
    src.mkdir(parents=True, exist_ok=True)
    log(f"downloading llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}'s source package into {src}")
    with tempfile.TemporaryDirectory(prefix=".download-", dir=src) as tmp:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--disable-pip-version-check",
                "--progress-bar",
                "off",
                "-d",
                tmp,
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
            ],
            what="pip download llama-cpp-python",
            log_path=cache_dir() / "logs" / "llama-cpp-python-sdist.log",
        )
        got = Path(tmp) / SDIST_NAME
        if not got.is_file():
            raise BuildError(f"pip download produced {sorted(p.name for p in Path(tmp).iterdir())}, not {SDIST_NAME}")
        if _sha256(got) != SDIST_SHA256:
            raise BuildError(f"{SDIST_NAME}: sha256 {_sha256(got)} is not the pinned {SDIST_SHA256}")
        os.replace(got, path)
    return path


# ------------------------------------------------------------------------------------------ llama-cpp-python
def llama_venv_python() -> Path:
    return cache_dir() / "llama-venv" / "bin" / "python"


def _wheel_fits(wheel: Path) -> bool:
    """Whether a cached wheel's tags fit this interpreter and machine (pip tags it py3-none-<platform>)."""
    parts = wheel.name[: -len(".whl")].split("-")
    if len(parts) != 5:
        return False
    python_tag, _abi, platform_tag = parts[2:]
    here = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return platform_tag == here and python_tag in {"py3", f"cp{sys.version_info.major}{sys.version_info.minor}"}


def _cached_wheel() -> Path | None:
    for wheel in sorted((cache_dir() / "wheels").glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}-*.whl")):
        if not _wheel_fits(wheel):
            continue
        with contextlib.suppress(zipfile.BadZipFile, OSError), zipfile.ZipFile(wheel) as z:
            if any(n.endswith("/libllama.so") for n in z.namelist()):
                return wheel
    return None


def build_llama_cpp_python(*, force: bool = False, log: Log = log_stderr) -> Path:
    """Build (once) llama-cpp-python's wheel and install it with ``[server]`` into ``<cache>/llama-venv``.

    Returns that virtualenv's python. ``force=True`` rebuilds the wheel and the virtualenv.
    """
    venv = cache_dir() / "llama-venv"
    python, stamp_path = llama_venv_python(), venv / ".cognis-llama-cpp-python.json"
    stamp = read_json(stamp_path)
    wheel = None if force else _cached_wheel()
    if (
        not force
        and wheel is not None
        and python.exists()
        and stamp
        and stamp.get("wheel") == wheel.name
        and stamp.get("version") == LLAMA_CPP_PYTHON_VERSION
    ):
        return python
    if wheel is None:
        if shutil.which("c++") is None and shutil.which("g++") is None:
            raise BuildUnavailable("building llama-cpp-python needs a C++ compiler: apt-get install -y cmake g++")
        sdist = fetch_sdist(log=log)
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        log_path = cache_dir() / "logs" / "llama-cpp-python-wheel.log"
        env = {**os.environ, "CMAKE_ARGS": " ".join(GGML_CMAKE_FLAGS), "CMAKE_BUILD_PARALLEL_LEVEL": str(BUILD_JOBS)}
        log(
            f"building the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} wheel (CMAKE_ARGS={env['CMAKE_ARGS']!r}, "
            f"{BUILD_JOBS} jobs; ~15 min on 2 cores) into {wheels}; log {log_path}"
        )
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".build-", dir=wheels) as tmp:
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "-w",
                    tmp,
                    str(sdist),
                ],
                what="pip wheel llama-cpp-python",
                log_path=log_path,
                env=env,
            )
            built = sorted(Path(tmp).glob("llama_cpp_python-*.whl"))
            if len(built) != 1:
                raise BuildError(f"pip wheel produced {sorted(p.name for p in Path(tmp).iterdir())}")
            os.replace(built[0], wheels / built[0].name)
            wheel = wheels / built[0].name
        seconds = time.monotonic() - t0
        atomic_write_json(
            wheel.with_name(wheel.name + ".build.json"),
            {
                "sdist_sha256": SDIST_SHA256,
                "cmake_args": " ".join(GGML_CMAKE_FLAGS),
                "jobs": BUILD_JOBS,
                "seconds": round(seconds),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
        )
        log(f"built {wheel.name} in {seconds / 60:.1f} min")
    else:
        log(f"reusing the cached wheel {wheel}")
    log(f"installing {wheel.name}[server] into its own virtualenv {venv}")
    t0 = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    log_path = cache_dir() / "logs" / "llama-venv.log"
    _run([sys.executable, "-m", "venv", str(venv)], what="python -m venv", log_path=log_path)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            f"{wheel}[server]",
        ],
        what="pip install llama-cpp-python[server]",
        log_path=log_path,
    )
    check = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"
    res = subprocess.run([str(python), "-c", check], capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or res.stdout.strip() != LLAMA_CPP_PYTHON_VERSION:
        raise BuildError(f"{venv}: importing llama_cpp.server failed:\n{res.stdout}{res.stderr}")
    atomic_write_json(
        stamp_path,
        {
            "version": LLAMA_CPP_PYTHON_VERSION,
            "wheel": wheel.name,
            "wheel_sha256": _sha256(wheel),
            "python": sys.version.split()[0],
        },
    )
    log(f"llama-cpp-python[server] {LLAMA_CPP_PYTHON_VERSION} ready in {venv} ({time.monotonic() - t0:.0f}s)")
    return python


def llama_cpp_python_status() -> dict[str, Any]:
    stamp = read_json(cache_dir() / "llama-venv" / ".cognis-llama-cpp-python.json")
    wheel = _cached_wheel()
    ready = bool(stamp and wheel and llama_venv_python().exists() and stamp.get("wheel") == wheel.name)
    build = read_json(wheel.with_name(wheel.name + ".build.json")) if wheel else None
    return {
        "state": "ready" if ready else "missing",
        "python": str(llama_venv_python()),
        "wheel": str(wheel) if wheel else None,
        "build_seconds": (build or {}).get("seconds"),
    }


# ------------------------------------------------------------------------------------------ llama-server
def llama_server_binary() -> Path:
    return cache_dir() / "llama-server" / "bin" / "llama-server"


def _llama_cpp_source(log: Log) -> Path:
    """``<cache>/src/llama_cpp_python-<v>/vendor/llama.cpp``, unpacked (once) from the source package."""
    top = cache_dir() / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    source = top / "vendor" / "llama.cpp"
    if (source / "tools" / "server" / "CMakeLists.txt").is_file():
        return source
    sdist = fetch_sdist(log=log)
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    log(f"unpacking {prefix} from {sdist.name}")
    with tempfile.TemporaryDirectory(prefix=".unpack-", dir=top.parent) as tmp, tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(tmp, members=members, filter="data")
        shutil.rmtree(top, ignore_errors=True)
        os.replace(Path(tmp) / top.name, top)
    return source


def build_llama_server(*, force: bool = False, log: Log = log_stderr) -> Path:
    """Build (once) llama.cpp's ``llama-server`` from the vendored sources; returns the binary's path."""
    root = cache_dir() / "llama-server"
    binary, stamp_path = llama_server_binary(), root / ".cognis-build.json"
    stamp = read_json(stamp_path)
    if (
        not force
        and binary.is_file()
        and stamp
        and stamp.get("version") == LLAMA_CPP_PYTHON_VERSION
        and stamp.get("cmake_flags") == list(LLAMA_SERVER_CMAKE_FLAGS)
    ):
        return binary
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise BuildUnavailable(f"building llama-server needs {' and '.join(missing)}: apt-get install -y cmake g++")
    source = _llama_cpp_source(log)
    build = root / "build"
    if force:
        shutil.rmtree(build, ignore_errors=True)
    log_path = cache_dir() / "logs" / "llama-server-build.log"
    log(
        f"building llama-server from {source} (cmake, target llama-server, -j{BUILD_JOBS}; 15-30 min on 2 cores) "
        f"in {build}; log {log_path}"
    )
    t0 = time.monotonic()
    _run(
        ["cmake", "-S", str(source), "-B", str(build), *LLAMA_SERVER_CMAKE_FLAGS],
        what="cmake (configure llama.cpp)",
        log_path=log_path,
    )
    _run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(BUILD_JOBS)],
        what="cmake --build --target llama-server",
        log_path=log_path,
    )
    built = build / "bin" / "llama-server"
    if not built.is_file():
        raise BuildError(f"the build finished without {built}; log {log_path}:\n{tail(log_path, 30)}")
    binary.parent.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(".llama-server.tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, binary)
    res = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise BuildError(f"{binary} --version failed (exit {res.returncode}):\n{res.stdout}{res.stderr}")
    seconds = time.monotonic() - t0
    atomic_write_json(
        stamp_path,
        {
            "version": LLAMA_CPP_PYTHON_VERSION,
            "cmake_flags": list(LLAMA_SERVER_CMAKE_FLAGS),
            "jobs": BUILD_JOBS,
            "seconds": round(seconds),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "llama_server_version": (res.stdout + res.stderr).strip().splitlines()[:2],
        },
    )
    log(f"llama-server ready: {binary} ({seconds / 60:.1f} min)")
    return binary


def llama_server_status() -> dict[str, Any]:
    stamp = read_json(cache_dir() / "llama-server" / ".cognis-build.json")
    ready = bool(
        llama_server_binary().is_file()
        and stamp
        and stamp.get("version") == LLAMA_CPP_PYTHON_VERSION
        and stamp.get("cmake_flags") == list(LLAMA_SERVER_CMAKE_FLAGS)
    )
    return {
        "state": "ready" if ready else "missing",
        "binary": str(llama_server_binary()),
        "build_seconds": (stamp or {}).get("seconds"),
    }
