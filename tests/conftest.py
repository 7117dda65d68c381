"""Shared fixtures: the local Multi30k mirror and a tiny, ready-to-use model directory."""

import gzip
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

# The suite runs two workers on two cores, and each starts processes of its own (the CLI, worker
# processes, torchrun): more threads than cores. OpenMP threads that wait at a barrier spin by default
# and take the core another process needed; waiting passively made the inference tests 10-20% faster
# here (tests/test_inference_*.py under -n 2: 86 and 95 s against 78 and 74 s). Set before torch is
# imported (OpenMP reads it once), and inherited by every process a test starts. Results do not change.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# Tiny models on a busy 2-core machine run faster on one thread than fighting over two.
torch.set_num_threads(1)

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def cpu_unless_marked_cuda(request, monkeypatch):
    """Every test sees a CPU-only machine unless it is marked `cuda`, so that the suite checks the
    same thing on a GPU machine as in CI (where "auto" means CPU). Subprocesses (torchrun, the CLI)
    are kept off the GPU by CUDA_VISIBLE_DEVICES. The GPU paths have their own tests (test_cuda.py).
    Session- and module-scoped fixtures are built before this runs: they must name their device."""
    if request.node.get_closest_marker("cuda") is None and HAS_CUDA:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def multi30k_root() -> Path:
    """The local Multi30k mirror: ../shared/data/multi30k from the repo root, or $NMT_MIRROR, which
    may be the Multi30k folder itself or a mirror of every corpus holding it as multi30k/."""
    root = Path(os.environ.get("NMT_MIRROR", REPO.parent / "shared" / "data" / "multi30k"))
    return root / "multi30k" if (root / "multi30k" / "data").is_dir() else root


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    root = multi30k_root()
    if not (root / "data/task1/raw/train.en.gz").exists():
        pytest.fail(f"Multi30k mirror not found at {root}; set NMT_MIRROR")
    return root


def read_head(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


# the tiny test models' shape (vocabularies aside)
TINY_SHAPE = dict(encoder_layers=2, decoder_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, multi30k_dir) -> Path:
    """A complete model directory (config.yaml, model.json, tokenizer.json, model.safetensors) holding a
    tiny de->en Transformer with random weights and a joint BPE tokenizer trained on 500 Multi30k pairs.
    Its translations are nonsense, but every code path from text to text runs for real."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"), multi30k_dir)


def write_tiny_model(model_dir: Path, multi30k: Path) -> Path:
    """The tiny model (see tiny_model_dir) written into `model_dir`, from the Multi30k mirror `multi30k`
    (also fuzz/api's model when it is given none)."""
    from nmt.checkpoint import save_model_dir
    from nmt.config import DecodeConfig, ExperimentConfig
    from nmt.model import ModelConfig, Transformer
    from nmt.tokenizer import TokenizerConfig, save_tokenizers, train_tokenizers

    raw = multi30k / "data/task1/raw"
    de, en = read_head(raw / "train.de.gz", 500), read_head(raw / "train.en.gz", 500)
    src_tok, tgt_tok = train_tokenizers(de, en, TokenizerConfig(vocab_size=500))
    save_tokenizers(src_tok, tgt_tok, model_dir)
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, **TINY_SHAPE)
    save_model_dir(Transformer(config), model_dir)
    experiment = ExperimentConfig(decode=DecodeConfig(max_len_b=5))  # random weights rarely say [END]: keep it short
    experiment.save(model_dir / "config.yaml")
    return model_dir


# Overrides that make a training run tiny: a 1+1-layer d=32 model, a 400-piece vocabulary.
TINY_TRAINING = [
    "model.preset=reference",
    "model.d_model=32",
    "model.num_heads=2",
    "model.d_ff=64",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "tokenizer.vocab_size=400",
    "train.batch_tokens=600",
    "train.warmup=10",
    "train.valid_bleu_sentences=8",
    "train.log_every=1",
    "train.seed=3",
    "train.tune_decoding=false",  # choosing alpha and precision at the end: tests/test_training_trainer.py
    "train.precision=fp32",  # the same arithmetic on every CPU: bf16 has tests/test_training_precision.py
]


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory, multi30k_dir) -> Path:
    """300 training and 40 validation pairs of real Multi30k de-en, as plain files."""
    root = tmp_path_factory.mktemp("corpus")
    raw = multi30k_dir / "data/task1/raw"
    for split, n in (("train", 300), ("val", 40)):
        for lang in ("de", "en"):
            (root / f"{split}.{lang}").write_text(
                "\n".join(read_head(raw / f"{split}.{lang}.gz", n)) + "\n", encoding="utf-8"
            )
    return root


@pytest.fixture
def overrides(tiny_corpus, tmp_path, monkeypatch) -> list[str]:
    """--set overrides for a tiny training run on tiny_corpus, with its own data cache."""
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "data_home"))
    return tiny_training(tiny_corpus)


def tiny_training(corpus: Path) -> list[str]:
    """The overrides of the `overrides` fixture, for a module's fixture (which sets its own NMT_DATA_HOME)."""
    files = [
        f"data.train_src={corpus / 'train.de'}",
        f"data.train_tgt={corpus / 'train.en'}",
        f"data.valid_src={corpus / 'val.de'}",
        f"data.valid_tgt={corpus / 'val.en'}",
    ]
    return TINY_TRAINING + files


@contextmanager
def own_data_home(folder: Path):
    """NMT_DATA_HOME set to `folder` for a module's fixture (monkeypatch is a test's alone)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NMT_DATA_HOME", str(folder))
        yield


# --- Marian models (tests/marian_models.py), shared by the import tests of both Marian formats ----------


@pytest.fixture(scope="session")
def marian_corpus(multi30k_dir):
    """(700 German and 700 English training sentences, 150 German validation sentences)."""
    raw = multi30k_dir / "data/task1/raw"
    de, en = read_head(raw / "train.de.gz", 700), read_head(raw / "train.en.gz", 700)
    test = read_head(raw / "val.de.gz", 150)
    return de, en, test


@pytest.fixture(scope="session")
def spm_models(tmp_path_factory, marian_corpus):
    from marian_models import train_spm

    de, en, _ = marian_corpus
    folder = tmp_path_factory.mktemp("spm")
    return train_spm(de, folder / "src", 300), train_spm(en, folder / "tgt", 300)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, spm_models, marian_corpus):
    """(Hugging Face directory, imported nmt directory) of a Marian model trained for 200 steps."""
    from nmt.pretrained.importing import import_marian

    from marian_models import save_marian

    de, en, _ = marian_corpus
    folder = tmp_path_factory.mktemp("trained")
    hf = save_marian(folder / "hf", *spm_models, train_on=(de[:600], en[:600]))
    return hf, import_marian(hf, folder / "nmt")


def model_dir_with(tmp_path, tiny_model_dir, end_bias=1.5, **overrides):
    """A random model of the given shape beside the tiny model's tokenizer, made to say [END] now and then.

    A random model almost never ends before the length limit; here the last LayerNorm's bias
    raises the [END] logit by `end_bias`, so that beam hypotheses end at different lengths and the
    length penalty, the end token's place in it and the two searches' stopping rules all come into
    play (greedy outputs still run to their limit at 1.5; at 4 most end within a few tokens).
    """
    from nmt.checkpoint import save_model_dir
    from nmt.config import DecodeConfig, ExperimentConfig
    from nmt.model import ModelConfig, Transformer
    from nmt.tokenizer import EOS_ID, load_tokenizers, save_tokenizers

    src_tok, tgt_tok = load_tokenizers(tiny_model_dir)
    save_tokenizers(src_tok, tgt_tok, tmp_path)
    torch.manual_seed(0)
    vocabularies = dict(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size)
    model = Transformer(ModelConfig(**vocabularies, **{**TINY_SHAPE, **overrides}))
    last_norm = model.decoder_norm if model.config.norm_position == "pre" else model.decoder_layers[-1].ff_residual.norm
    end = model.output.weight[EOS_ID].detach()
    with torch.no_grad():
        last_norm.bias += end_bias * end / end.norm() ** 2
    save_model_dir(model, tmp_path)
    experiment = ExperimentConfig(decode=DecodeConfig(max_len_b=5))
    experiment.save(tmp_path / "config.yaml")
    return tmp_path
