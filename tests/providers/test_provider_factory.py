"""Provider factory: which class each setting selects, with which options, and the errors it raises."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cognis_memory.config import Settings
from cognis_memory.providers import default_model, factory
from cognis_memory.providers.base import LLM, Embedder, Reranker
from cognis_memory.providers.llms import BedrockConverseLLM, OpenAICompatibleLLM
from cognis_memory.providers.onnx_embedder import OnnxEmbedder
from cognis_memory.providers.rerankers import LocalCrossEncoderReranker, SageMakerReranker
from cognis_memory.providers.sentence_transformers_embedder import SentenceTransformerEmbedder
from cognis_memory.providers.settings import EmbedderSettings, LLMSettings, RerankerSettings
from cognis_memory.wiring import build_embedder, build_llm, build_reranker

pytestmark = pytest.mark.usefixtures("no_cognis_env")


def test_none_means_no_provider() -> None:
    settings = Settings()
    assert settings.reranker.kind == "none" and settings.llm.kind == "none"
    assert build_reranker(settings) is None
    assert build_llm(settings) is None


# --- rerankers -------------------------------------------------------------------------------


def test_local_reranker_requires_a_path() -> None:
    with pytest.raises(ValueError) as info:
        build_reranker(Settings(reranker="local"))
    assert str(info.value) == "reranker=local requires reranker_path (COGNIS_RERANKER_PATH)"


def test_local_reranker_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="reranker_path"):
        build_reranker(Settings(reranker="local", reranker_path=str(tmp_path / "missing")))


async def test_local_reranker_from_settings(tiny_cross_encoder_dir: Path) -> None:
    reranker = build_reranker(Settings(reranker="local", reranker_path=str(tiny_cross_encoder_dir)))
    assert isinstance(reranker, LocalCrossEncoderReranker) and isinstance(reranker, Reranker)
    assert reranker.path == tiny_cross_encoder_dir
    assert len(await reranker.rerank("q", ["a", "b", "c"])) == 3


def test_sagemaker_reranker_requires_an_endpoint() -> None:
    for endpoint in (None, "", "  "):
        with pytest.raises(ValueError) as info:
            build_reranker(Settings(reranker="sagemaker", sagemaker_endpoint=endpoint))
        assert str(info.value) == "reranker=sagemaker requires sagemaker_endpoint (COGNIS_SAGEMAKER_ENDPOINT)"


@pytest.mark.usefixtures("aws_env")
def test_sagemaker_reranker_from_settings() -> None:
    settings = Settings(reranker="sagemaker", sagemaker_endpoint="bge", aws_region="eu-west-1", reranker_timeout_ms=900)
    reranker = build_reranker(settings)
    assert isinstance(reranker, SageMakerReranker) and isinstance(reranker, Reranker)
    assert reranker.endpoint_name == "bge" and reranker.payload_format == "tei"
    assert reranker.timeout_ms == 900
    assert reranker._client.meta.region_name == "eu-west-1"
    assert reranker._client.meta.config.read_timeout == pytest.approx(0.9)


@pytest.mark.usefixtures("aws_env")
def test_sagemaker_reranker_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGNIS_RERANKER", "sagemaker")
    monkeypatch.setenv("COGNIS_SAGEMAKER_ENDPOINT", "from-env")
    reranker = build_reranker(Settings())
    assert isinstance(reranker, SageMakerReranker) and reranker.endpoint_name == "from-env"
    assert reranker._client.meta.region_name == "us-east-1"  # AWS_DEFAULT_REGION when aws_region is unset


def test_unknown_reranker_kind() -> None:
    with pytest.raises(ValueError, match="reranker must be one of none, local, sagemaker"):
        factory.build_reranker(RerankerSettings.model_construct(kind="cohere"), device="cpu", aws_region=None)


# --- LLMs ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws_env")
def test_bedrock_llm_from_settings() -> None:
    settings = Settings(llm="bedrock", aws_region="us-west-2", llm_timeout_s=12)
    llm = build_llm(settings)
    assert isinstance(llm, BedrockConverseLLM) and isinstance(llm, LLM)
    assert llm.model_id == "us.amazon.nova-2-lite-v1:0"  # the settings default in a US Region (bedrock_models.py)
    assert llm.timeout_s == 12
    assert llm._client.meta.region_name == "us-west-2"
    assert llm._client.meta.config.read_timeout == 12


def test_bedrock_llm_requires_a_model_id() -> None:
    with pytest.raises(ValueError) as info:
        build_llm(Settings(llm="bedrock", bedrock_model_id=""))
    assert str(info.value) == "llm=bedrock requires bedrock_model_id (COGNIS_BEDROCK_MODEL_ID)"


def test_openai_llm_requires_a_base_url() -> None:
    with pytest.raises(ValueError) as info:
        build_llm(Settings(llm="openai"))
    assert str(info.value) == "llm=openai requires openai_base_url (COGNIS_OPENAI_BASE_URL)"


def test_openai_llm_requires_a_model() -> None:
    with pytest.raises(ValueError, match=r"llm=openai requires openai_model \(COGNIS_OPENAI_MODEL\)"):
        build_llm(Settings(llm="openai", openai_base_url="http://127.0.0.1:8000/v1", openai_model=""))


def test_openai_llm_from_settings() -> None:
    settings = Settings(
        llm="openai",
        openai_base_url="http://127.0.0.1:8000/v1/",
        openai_model="llama-3.1-8b",
        openai_api_key="sk-local",
        llm_timeout_s=7.5,
    )
    llm = build_llm(settings)
    assert isinstance(llm, OpenAICompatibleLLM) and isinstance(llm, LLM)
    assert llm.url == "http://127.0.0.1:8000/v1/chat/completions"
    assert llm.model == "llama-3.1-8b" and llm.timeout_s == 7.5
    assert llm._api_key == "sk-local"  # unwrapped from the SecretStr


def test_openai_llm_without_key() -> None:
    llm = build_llm(Settings(llm="openai", openai_base_url="http://127.0.0.1:8000/v1"))
    assert isinstance(llm, OpenAICompatibleLLM) and llm._api_key is None


def test_unknown_llm_kind() -> None:
    with pytest.raises(ValueError, match="llm must be one of none, bedrock, openai"):
        factory.build_llm(LLMSettings.model_construct(kind="anthropic"), aws_region=None)


# --- embedder --------------------------------------------------------------------------------


def test_default_embedder_is_the_packaged_minilm_on_onnx_runtime() -> None:
    embedder = build_embedder(Settings(embedding_batch_size=8, embedding_threads=1))
    assert isinstance(embedder, OnnxEmbedder) and isinstance(embedder, Embedder)
    assert embedder.name == default_model.NAME and embedder.dim == 384 and embedder.batch_size == 8
    vectors = embedder.embed(["hello", "world"])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_sentence_transformers_embedder_is_selectable() -> None:
    embedder = build_embedder(Settings(embedder="sentence-transformers", embedding_batch_size=8))
    assert isinstance(embedder, SentenceTransformerEmbedder) and isinstance(embedder, Embedder)
    assert embedder.dim == 384 and embedder._batch_size == 8
    assert embedder.input_key("Hello  World") == embedder.input_key("hello world")


def test_embedder_path_must_exist(tmp_path: Path) -> None:
    tokenizer = default_model.tokenizer_file()
    with pytest.raises(FileNotFoundError, match="embedder_path"):
        build_embedder(Settings(embedder_path=str(tmp_path / "nope.onnx"), embedder_tokenizer=tokenizer))
    with pytest.raises(FileNotFoundError, match="embedder_path"):
        build_embedder(Settings(embedder="sentence-transformers", embedder_path=str(tmp_path / "nope")))


def test_an_onnx_file_of_ones_own_needs_its_tokenizer() -> None:
    with pytest.raises(ValueError, match="embedder_tokenizer .COGNIS_EMBEDDER_TOKENIZER."):
        build_embedder(Settings(embedder_path=default_model.onnx_file()))
    named = build_embedder(
        Settings(embedder_path=default_model.onnx_file(), embedder_tokenizer=default_model.tokenizer_file())
    )
    assert named.name == Path(default_model.onnx_file()).stem  # an own file is named by its stem


def test_unknown_embedder_kind() -> None:
    with pytest.raises(ValueError, match="embedder must be one of onnx, sentence-transformers"):
        factory.build_embedder(EmbedderSettings.model_construct(kind="tfidf"))


# --- registry ----------------------------------------------------------------------------------


def test_every_registered_provider_loads_a_class_that_builds_itself_from_the_settings() -> None:
    from cognis_memory.providers.registry import EMBEDDERS, LLMS, RERANKERS

    for family, providers in (("embedder", EMBEDDERS), ("reranker", RERANKERS), ("llm", LLMS)):
        for kind, load in providers.items():
            builder = load()
            cls = getattr(builder, "__self__", None)  # the class whose from_settings it is
            assert isinstance(cls, type) and builder == cls.from_settings, (family, kind)
            assert getattr(Settings(**{family: kind}), family).kind == kind


@pytest.mark.parametrize("family", ["embedder", "reranker", "llm"])
def test_settings_refuse_an_unregistered_provider_kind(family: str) -> None:
    with pytest.raises(ValueError, match=f"unknown {family} kind 'nope'") as info:
        Settings(**{family: "nope"})
    # named as the component and its flat name, with the value given
    assert f"\n{family}.{family}\n" in str(info.value) and "input_value='nope'" in str(info.value)


def test_the_cli_offers_the_registered_provider_kinds() -> None:
    from cognis_memory.cli import build_parser
    from cognis_memory.providers.registry import EMBEDDERS, LLMS, RERANKERS

    for flag, kinds in (
        ("--embedder", list(EMBEDDERS)),
        ("--reranker", ["none", *RERANKERS]),
        ("--llm", ["none", *LLMS]),
    ):
        for kind in kinds:
            args = build_parser().parse_args(["reconcile", flag, kind])
            assert getattr(args, flag[2:]) == kind
        with pytest.raises(SystemExit):
            build_parser().parse_args(["reconcile", flag, "nope"])
