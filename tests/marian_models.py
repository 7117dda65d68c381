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
