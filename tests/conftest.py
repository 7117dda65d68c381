"""Shared fixtures: the local Multi30k mirror and a tiny, ready-to-use model directory."""

import gzip
import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

# Tiny models on a busy 2-core machine run faster on one thread than fighting over two.
torch.set_num_threads(1)


def multi30k_root() -> Path:
    """The local Multi30k mirror (../shared/data/multi30k from the repo root, or $NMT_MIRROR)."""
    return Path(os.environ.get("NMT_MIRROR", REPO.parent / "shared" / "data" / "multi30k"))


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    root = multi30k_root()
    if not (root / "data/task1/raw/train.en.gz").exists():
        pytest.fail(f"Multi30k mirror not found at {root}; set NMT_MIRROR")
    return root


def read_head(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, multi30k_dir) -> Path:
    """A complete model directory (config.yaml, model.json, tokenizer.json, model.safetensors) holding a
    tiny de->en Transformer with random weights and a joint BPE tokenizer trained on 500 Multi30k pairs.
    Its translations are nonsense, but every code path from text to text runs for real."""
    from nmt.checkpoint import save_model_dir
    from nmt.config import ExperimentConfig
    from nmt.model import ModelConfig, Transformer
    from nmt.tokenizer import TokenizerConfig, save_tokenizers, train_tokenizers

    model_dir = tmp_path_factory.mktemp("tiny_model")
    raw = multi30k_dir / "data/task1/raw"
    de, en = read_head(raw / "train.de.gz", 500), read_head(raw / "train.en.gz", 500)
    src_tok, tgt_tok = train_tokenizers(de, en, TokenizerConfig(vocab_size=500))
    save_tokenizers(src_tok, tgt_tok, model_dir)
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, encoder_layers=2,
                         decoder_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0)
    save_model_dir(Transformer(config), model_dir)
    experiment = ExperimentConfig()
    experiment.decode.max_len_b = 5  # random weights rarely say [END]: keep outputs short
    experiment.save(model_dir / "config.yaml")
    return model_dir
