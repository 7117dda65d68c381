"""Validation: loss and accuracy on the whole validation set, BLEU of greedy translations of a subset."""

from __future__ import annotations

import math

import torch

from ..config import DecodeConfig
from ..data.batching import TokenBatchSampler, collate
from ..evaluation import score_translations
from ..model import Transformer
from ..translator import Translator
from .datasets import TrainingData
from .loss import label_smoothed_loss


@torch.no_grad()
def validation_loss(
    model: Transformer, data: TrainingData, *, batch_tokens: int, device: torch.device
) -> dict[str, float]:
    """Per-token negative log-likelihood (no smoothing), perplexity and accuracy over real tokens."""
    valid = data.valid
    sampler = TokenBatchSampler(valid.src_lengths(), valid.tgt_lengths(), max_tokens=batch_tokens, shuffle=False)
    nll = correct = tokens = 0.0
    for idx in sampler.batches(0):
        pairs = [valid.src[i] for i in idx], [valid.tgt[i] for i in idx]
        batch = collate(*pairs, idx, pad_id=model.config.pad_id).to(device)
        logits = model(batch.src, batch.tgt_in)
        out = label_smoothed_loss(logits, batch.tgt_out, normaliser=1, smoothing=0.0, pad_id=model.config.pad_id)
        nll += out.nll_sum.item()
        correct += out.correct.item()
        tokens += out.tokens
    tokens = max(tokens, 1)
    return {"loss": nll / tokens, "ppl": math.exp(min(nll / tokens, 50)), "acc": correct / tokens}


def validate(
    model: Transformer,
    data: TrainingData,
    *,
    batch_tokens: int,
    device: torch.device,
    bleu_sentences: int,
    decode: DecodeConfig,
) -> dict[str, float]:
    """Loss/ppl/acc, plus cased BLEU and chrF of greedy translations of the first `bleu_sentences`
    (of each direction, for a multilingual model: bleu_de-en, chrf_de-en, ..., and bleu and chrf
    their mean)."""
    was_training = model.training
    model.eval()
    result = validation_loss(model, data, batch_tokens=batch_tokens, device=device)
    if bleu_sentences > 0:
        # One worker on the training process's own threads: no thread pool and no change to torch's
        # thread count inside a training process (under torchrun a pool of decoding threads made
        # rank 0 abort at exit now and then: "terminate called without an active exception").
        translator = Translator(
            model, data.src_tokenizer, data.tgt_tokenizer, decode=decode, workers=1, threads=torch.get_num_threads()
        )
        scored = {
            valid.direction: score_translations(
                translator.translate(valid.sources[:bleu_sentences], translator.request(beam=1)),
                valid.references[:bleu_sentences],
                pretokenized=data.pretokenized,
            )
            for valid in data.validation_sets()
        }
        for metric in ("bleu", "chrf"):
            values = {direction: getattr(scores, metric) for direction, scores in scored.items()}
            if len(values) > 1:
                result.update({f"{metric}_{direction}": value for direction, value in values.items()})
            result[metric] = sum(values.values()) / len(values)
    model.train(was_training)
    return result
