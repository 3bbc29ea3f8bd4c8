"""A minimal reader of a GGUF file's header and metadata (enough to check which model a file holds).

Layout (GGUF versions 2 and 3, little-endian throughout):

* ``uint32`` magic, the bytes ``b"GGUF"``; ``uint32`` version; ``uint64`` tensor count;
  ``uint64`` metadata key/value count;
* then, per key/value: the key as a GGUF string (``uint64`` byte length + UTF-8 bytes, no NUL),
  a ``uint32`` value type, and the value. Scalars are stored as their fixed-size binary form,
  strings as GGUF strings, bool as one byte, and an array as ``uint32`` element type + ``uint64``
  element count + the elements (nested arrays allowed).

Tensor descriptors and tensor data follow the metadata; this reader stops before them. Arrays
(the tokenizer's vocabulary, merges, token types) are skipped: only their element type and length
are kept. Version 1 (``uint32`` counts) predates everything we use and is refused.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

__all__ = ["GGUF_MAGIC", "GGUFError", "GGUFHeader", "GGUFType", "read_gguf_header"]

GGUF_MAGIC = b"GGUF"


class GGUFType:
    """Value type codes of GGUF metadata."""

    UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)


# Fixed-size scalar types: struct format (little-endian).
_SCALAR_FORMATS: dict[int, str] = {
    GGUFType.UINT8: "<B",
    GGUFType.INT8: "<b",
    GGUFType.UINT16: "<H",
    GGUFType.INT16: "<h",
    GGUFType.UINT32: "<I",
    GGUFType.INT32: "<i",
    GGUFType.FLOAT32: "<f",
    GGUFType.BOOL: "<B",
    GGUFType.UINT64: "<Q",
    GGUFType.INT64: "<q",
    GGUFType.FLOAT64: "<d",
}

# Sanity limits, so that a corrupt or hostile file cannot make us allocate or loop without bound.
MAX_KV_COUNT = 1 << 16
MAX_STRING_BYTES = 1 << 24  # 16 MiB; a chat template is a few KiB
MAX_ARRAY_LENGTH = 1 << 32
MAX_ARRAY_DEPTH = 4

Scalar = str | int | float | bool


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands (bad magic, version, type, or truncated)."""


@dataclass
class GGUFHeader:
    """What precedes a GGUF file's tensor descriptors."""

    version: int
    tensor_count: int
    metadata: dict[str, Scalar] = field(default_factory=dict)
    #: key -> (element type, element count) of each array value (skipped, not read)
    arrays: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: bytes read, i.e. where the tensor descriptors begin
    metadata_end: int = 0


class _Reader:
    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.pos = 0

    def read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise GGUFError(f"truncated GGUF: wanted {n} bytes at offset {self.pos}, got {len(data)}")
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        # Small skips (one token string) read through the buffer; large ones seek when the file allows it.
        if n > 1 << 16 and self.f.seekable():
            here = self.f.tell()
            end = self.f.seek(0, os.SEEK_END)
            if here + n > end:
                raise GGUFError(f"truncated GGUF: {n} bytes to skip at offset {self.pos}, file ends at {end}")
            self.f.seek(here + n)
            self.pos += n
            return
        while n:
            chunk = self.read(min(n, 1 << 20))
            n -= len(chunk)

    def scalar(self, fmt: str) -> int | float:
        value: int | float = struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]
        return value

    def u32(self) -> int:
        return int(self.scalar("<I"))

    def u64(self) -> int:
        return int(self.scalar("<Q"))

    def string(self) -> str:
        n = self.u64()
        if n > MAX_STRING_BYTES:
            raise GGUFError(f"GGUF string of {n} bytes at offset {self.pos - 8} is larger than {MAX_STRING_BYTES}")
        return self.read(n).decode("utf-8", "replace")

    def skip_string(self) -> None:
        n = self.u64()
        if n > MAX_STRING_BYTES:
            raise GGUFError(f"GGUF string of {n} bytes at offset {self.pos - 8} is larger than {MAX_STRING_BYTES}")
        self.skip(n)

    def skip_array(self, depth: int = 0) -> tuple[int, int]:
        if depth >= MAX_ARRAY_DEPTH:
            raise GGUFError(f"GGUF arrays nested deeper than {MAX_ARRAY_DEPTH} at offset {self.pos}")
        elem_type, count = self.u32(), self.u64()
        if count > MAX_ARRAY_LENGTH:
            raise GGUFError(f"GGUF array of {count} elements at offset {self.pos - 12}")
        if elem_type in _SCALAR_FORMATS:
            self.skip(count * struct.calcsize(_SCALAR_FORMATS[elem_type]))
        elif elem_type == GGUFType.STRING:
            for _ in range(count):
                self.skip_string()
        elif elem_type == GGUFType.ARRAY:
            for _ in range(count):
                self.skip_array(depth + 1)
        else:
            raise GGUFError(f"unknown GGUF array element type {elem_type} at offset {self.pos - 12}")
        return elem_type, count


def read_gguf_header(source: str | os.PathLike[str] | BinaryIO) -> GGUFHeader:
    """Read the header and the metadata key/value pairs of a GGUF file (a path or a binary file object).

    Strings, integers, floats and bools come back as Python values in ``metadata``; arrays are
    skipped and listed in ``arrays``. Raises :class:`GGUFError` on anything else.
    """
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            return read_gguf_header(f)
    r = _Reader(source)
    magic = r.read(4)
    if magic != GGUF_MAGIC:
        raise GGUFError(f"not a GGUF file: magic {magic!r}, expected {GGUF_MAGIC!r}")
    version = r.u32()
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version} (this reader knows 2 and 3)")
    tensor_count, kv_count = r.u64(), r.u64()
    if kv_count > MAX_KV_COUNT:
        raise GGUFError(f"implausible GGUF metadata count {kv_count}")
    header = GGUFHeader(version=version, tensor_count=tensor_count)
    for _ in range(kv_count):
        key = r.string()
        value_type = r.u32()
        if value_type == GGUFType.STRING:
            header.metadata[key] = r.string()
        elif value_type == GGUFType.BOOL:
            header.metadata[key] = bool(r.scalar("<B"))
        elif value_type in _SCALAR_FORMATS:
            header.metadata[key] = r.scalar(_SCALAR_FORMATS[value_type])
        elif value_type == GGUFType.ARRAY:
            header.arrays[key] = r.skip_array()
        else:
            raise GGUFError(f"unknown GGUF value type {value_type} for key {key!r} at offset {r.pos - 4}")
    header.metadata_end = r.pos
    return header
