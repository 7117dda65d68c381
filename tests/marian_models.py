"""Seeded random Marian models in the Hugging Face layout, built here (no network, no downloads).

A model directory as OPUS-MT publishes it: config.json, model.safetensors, source.spm and
target.spm (SentencePiece unigram models trained on a few hundred Multi30k sentences), vocab.json
(``</s>`` 0, ``<unk>`` 1, the pieces of both models, ``<pad>`` last) and tokenizer_config.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece
import torch


def train_spm(lines: list[str], prefix: Path, vocab_size: int) -> Path:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        seed_sentencepiece_size=100000,
        shuffle_input_sentence=False,
    )
    return prefix.with_suffix(".model")


def pieces(model: Path) -> list[str]:
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return [
        processor.id_to_piece(i)
        for i in range(processor.get_piece_size())
        if not (processor.is_control(i) or processor.is_unknown(i))
    ]


def marian_vocab(*models: Path, language_codes: tuple[str, ...] = ()) -> dict[str, int]:
    """OPUS-MT's layout: </s> 0, <unk> 1, language codes, every piece once, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for token in [f">>{code}<<" for code in language_codes]:
        vocab[token] = len(vocab)
    for model in models:
        for piece in pieces(model):
            vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def save_marian(
    out: Path,
    src_spm: Path,
    tgt_spm: Path,
    *,
    d_model: int = 32,
    layers: tuple[int, int] = (2, 2),
    heads: int = 4,
    d_ff: int = 64,
    activation: str = "swish",
    scale_embedding: bool = True,
    separate_vocabs: bool = False,
    tie_output: bool = True,
    language_codes: tuple[str, ...] = (),
    seed: int = 0,
    train_on: tuple[list[str], list[str]] | None = None,
    steps: int = 200,
) -> Path:
    """A seeded random MarianMTModel with its tokenizer files, saved as transformers saves it.

    train_on: (source lines, target lines) to train it on for `steps` Adam steps first: a random
    model repeats one token until its length limit, a briefly trained one gives varied outputs that
    end with </s>, which is what a comparison of searches needs.
    """
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True)
    (out / "source.spm").write_bytes(src_spm.read_bytes())
    (out / "target.spm").write_bytes(tgt_spm.read_bytes())
    if separate_vocabs:
        src_vocab, tgt_vocab = marian_vocab(src_spm), marian_vocab(tgt_spm)
        (out / "target_vocab.json").write_text(json.dumps(tgt_vocab, ensure_ascii=False))
    else:
        src_vocab = tgt_vocab = marian_vocab(src_spm, tgt_spm, language_codes=language_codes)
    (out / "vocab.json").write_text(json.dumps(src_vocab, ensure_ascii=False))
    pad = tgt_vocab["<pad>"]
    config = MarianConfig(
        vocab_size=len(src_vocab),
        decoder_vocab_size=len(tgt_vocab),
        d_model=d_model,
        encoder_layers=layers[0],
        decoder_layers=layers[1],
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=d_ff,
        decoder_ffn_dim=d_ff,
        activation_function=activation,
        scale_embedding=scale_embedding,
        share_encoder_decoder_embeddings=not separate_vocabs,
        tie_word_embeddings=tie_output,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_position_embeddings=256,
        dropout=0.1,
        init_std=0.1,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    with torch.no_grad():  # random, not zero: the importer must carry the output bias over
        model.final_logits_bias.normal_(0, 0.5)
    if train_on is not None:
        train(model, out, *train_on, steps=steps)
    with torch.no_grad():  # as in OPUS-MT's conversion from Marian, which starts decoding from zeros
        model.model.decoder.embed_tokens.weight[pad].zero_()
    model.eval().save_pretrained(out)
    # What OPUS-MT's generation_config.json adds (transformers 5 keeps no generation settings in MarianConfig).
    generation = json.loads((out / "generation_config.json").read_text())
    generation.update(num_beams=4, bad_words_ids=[[pad]], max_length=512)
    (out / "generation_config.json").write_text(json.dumps(generation))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "source_lang": "de",
                "target_lang": "en",
                "separate_vocabs": separate_vocabs,
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": 512,
                "tokenizer_class": "MarianTokenizer",
            }
        )
    )
    return out


def train(model, directory: Path, sources: list[str], targets: list[str], steps: int, batch: int = 32) -> None:
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(directory)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        start = (step * batch) % max(1, len(sources) - batch)
        inputs = tokenizer(
            sources[start : start + batch],
            text_target=targets[start : start + batch],
            return_tensors="pt",
            padding=True,
        )
        inputs["labels"][inputs["labels"] == tokenizer.pad_token_id] = -100
        loss = model(**inputs).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def save_marian_release(hf_dir: Path, out: Path, *, beam: int = 4, normalize: float = 1.0) -> Path:
    """The Hugging Face Marian model in `hf_dir` written back in Marian's own release format.

    transformers' conversion (convert_marian_to_pytorch) run backwards: every weight under its
    Marian name, input-major (transposed), biases and norms as (1, n) rows, the embeddings and the
    output bias without the <pad> that the conversion appended, the options in `special:model.yml`
    (NUL-terminated), decoder.yml naming the files, one vocabulary .yml per side.
    CTranslate2's own Marian converter reads the result, which checks the layout independently.
    """
    import numpy as np
    import yaml
    from transformers import MarianMTModel

    model = MarianMTModel.from_pretrained(hf_dir).eval()
    config = model.config
    settings = json.loads((hf_dir / "tokenizer_config.json").read_text())
    separate = bool(settings.get("separate_vocabs"))
    out.mkdir(parents=True)
    state = {name: t.detach().float().numpy() for name, t in model.state_dict().items()}

    def row(vector):
        return vector.reshape(1, -1)

    arrays = {}
    for side, depth, blocks in (
        ("encoder", config.encoder_layers, {"self": "self_attn"}),
        ("decoder", config.decoder_layers, {"self": "self_attn", "context": "encoder_attn"}),
    ):
        for i in range(depth):
            ours, theirs = f"{side}_l{i + 1}", f"model.{side}.layers.{i}"
            for block, attention in blocks.items():
                for p, proj in {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}.items():
                    arrays[f"{ours}_{block}_W{p}"] = state[f"{theirs}.{attention}.{proj}.weight"].T
                    arrays[f"{ours}_{block}_b{p}"] = row(state[f"{theirs}.{attention}.{proj}.bias"])
                arrays[f"{ours}_{block}_Wo_ln_scale"] = row(state[f"{theirs}.{attention}_layer_norm.weight"])
                arrays[f"{ours}_{block}_Wo_ln_bias"] = row(state[f"{theirs}.{attention}_layer_norm.bias"])
            for k in ("1", "2"):
                arrays[f"{ours}_ffn_W{k}"] = state[f"{theirs}.fc{k}.weight"].T
                arrays[f"{ours}_ffn_b{k}"] = row(state[f"{theirs}.fc{k}.bias"])
            arrays[f"{ours}_ffn_ffn_ln_scale"] = row(state[f"{theirs}.final_layer_norm.weight"])
            arrays[f"{ours}_ffn_ffn_ln_bias"] = row(state[f"{theirs}.final_layer_norm.bias"])
    if separate:
        arrays["encoder_Wemb"] = state["model.encoder.embed_tokens.weight"][:-1]
        arrays["decoder_Wemb"] = state["model.decoder.embed_tokens.weight"][:-1]
    else:
        arrays["Wemb"] = state["model.shared.weight"][:-1]
    arrays["decoder_ff_logit_out_b"] = state["final_logits_bias"][:, :-1]
    tied = config.tie_word_embeddings
    if not tied:  # current Marian stores an output of its own as (vocab, d_model): "Wt"
        arrays["decoder_ff_logit_out_Wt"] = state["lm_head.weight"][:-1]
    options = {
        "type": "transformer",
        "enc-depth": config.encoder_layers,
        "dec-depth": config.decoder_layers,
        "dim-emb": config.d_model,
        "transformer-heads": config.encoder_attention_heads,
        "transformer-dim-ffn": config.encoder_ffn_dim,
        "transformer-ffn-activation": config.activation_function,
        "transformer-ffn-depth": 2,
        "transformer-preprocess": "",
        "transformer-postprocess": "dan",
        "transformer-postprocess-emb": "d",
        "transformer-decoder-autoreg": "self-attention",
        "transformer-no-projection": False,
        "transformer-train-position-embeddings": False,
        "transformer-guided-alignment-layer": "last",
        "transformer-dropout": 0.1,
        "tied-embeddings-all": not separate,
        "tied-embeddings-src": not separate,
        "tied-embeddings": tied,
        "dim-vocabs": [config.vocab_size - 1, config.decoder_vocab_size - 1],
        "right-left": False,
        "layer-normalization": False,
    }
    text = yaml.safe_dump(options, sort_keys=False).encode("utf-8") + b"\0"
    arrays["special:model.yml"] = np.frombuffer(text, dtype=np.int8)
    np.savez(out / "model.npz", **arrays)

    def vocab_yml(path: Path, name: str) -> str:
        vocab = json.loads(path.read_text())
        del vocab["<pad>"]
        (out / name).write_text(yaml.safe_dump(vocab, allow_unicode=True, sort_keys=False), encoding="utf-8")
        return name

    if separate:
        vocabs = [
            vocab_yml(hf_dir / "vocab.json", "src.vocab.yml"),
            vocab_yml(hf_dir / "target_vocab.json", "trg.vocab.yml"),
        ]
    else:
        vocabs = [vocab_yml(hf_dir / "vocab.json", "vocab.yml")] * 2
    decoder = {"models": ["model.npz"], "vocabs": vocabs, "beam-size": beam, "normalize": normalize}
    (out / "decoder.yml").write_text(yaml.safe_dump(decoder, sort_keys=False), encoding="utf-8")
    for name in ("source.spm", "target.spm"):
        (out / name).write_bytes((hf_dir / name).read_bytes())
    return out


def assert_import_refused(broken: Path, message: str, capsys) -> None:
    """`nmt import` of `broken` fails with one error line matching `message` that names the directory,
    and leaves nothing beside it (no output directory, no staging directory)."""
    import re

    from nmt.cli import main

    out = broken.parent / "out"
    assert main(["import", "--from", "marian", str(broken), "--out", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "Traceback" not in err[0]
    assert re.search(message, err[0]), err[0]
    assert str(broken) in err[0]
    assert not out.exists() and [p.name for p in broken.parent.iterdir()] == [broken.name]


def marian_position_table(length: int, d_model: int):
    """Marian's sinusoidal position table as its C++ computes it (inits::sinusoidalPositionEmbeddings),
    in float32: log timescale step log(10000) / (d/2 - 1), all sins then all cos, from position 0."""
    import numpy as np

    half = d_model // 2
    increment = np.float32(np.log(np.float32(10000.0)) / (np.float32(half) - np.float32(1.0)))
    table = np.zeros((length, d_model), dtype=np.float32)
    for p in range(length):
        v = np.float32(p) * np.exp(np.arange(half, dtype=np.float32) * -increment)
        table[p, :half], table[p, half : 2 * half] = np.sin(v), np.cos(v)
    return table
