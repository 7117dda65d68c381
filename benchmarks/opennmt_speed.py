"""Training speed of OpenNMT-py beside nmt's: the default recipe's model, data and batches, target tokens/s.

    pip install --no-deps --target /work/onmt/site OpenNMT-py==3.5.1 "pyonmttok>=1.37,<2" configargparse
    python benchmarks/opennmt_speed.py [--steps 200] [--warmup 20] [--rounds 2] [--threads 2] [--onmt-site DIR]
        [--precisions auto,fp32,bf16] [--no-workers]

OpenNMT-py 3.5.1 pins torch<2.3 (and CUDA wheels with it), so it is installed without its
dependencies into a folder of its own and runs on the installed torch, with that folder on
PYTHONPATH. Of its declared dependencies training needs only pyonmttok (its vocabularies) and
configargparse (its options); the others are imported at start-up by transforms this run does not
use (spacy, pyahocorasick, rapidfuzz, fasttext) and are stubbed out in the OpenNMT-py process when
missing. Nothing else is patched: its model, data pipeline and training loop run as shipped.

Both sides train configs/multi30k_de_en.yaml's model on the same text:
- data: Multi30k de->en train, segmented by the default joint BPE tokenizer (8,192 ids, the one the
  other benchmarks use; the nmt runs are handed the same tokenizer), length-filtered as the recipe
  does (128 tokens a side, ratio 3); OpenNMT-py reads the pieces as space-separated text, with the
  vocabulary's 8,188 pieces after its own 4 specials: 8,192 ids, the same embedding table.
- model: 3+3 layers, d_model 256, 4 heads, d_ff 1024, relu, dropout 0.1, no attention dropout,
  sinusoidal positions (interleaved), scaled embeddings, one matrix for source, target and output
  embeddings (nmt's sharing=all; OpenNMT-py's share_embeddings + share_decoder_embeddings), biases
  on every projection (OpenNMT-py's add_qkvbias, add_ffnbias), LayerNorm eps 1e-6.
- optimisation: Adam(0.9, 0.98), label smoothing 0.1, clipping at norm 1, noam schedule with scale
  0.6 and 600 warm-up steps, loss averaged over target tokens, no validation in the timed steps.
--precisions times nmt in several of its train.precision settings (fp32, bf16: one process each per
round); OpenNMT-py trains in fp32 on CPU (its mixed precision is CUDA's), so `nmt_bf16_over_opennmt`
compares each toolkit's fastest CPU training, not the same arithmetic.

What differs, by design of the toolkits: OpenNMT-py 3.5 has pre-norm layers only (nmt's recipe is
post-norm: the same LayerNorms, two more at the stack ends: 1,024 parameters), a bias on the output
layer (8,192: 7,635,968 parameters in all against nmt's 7,626,752, both printed), separate Q, K
and V projections (nmt: one matmul), dropout also on the feed-forward's hidden units, torch's dropout
(nmt draws its CPU dropout masks more cheaply: nmt.model.dropout), Adam eps 1e-8 (nmt's 1e-9; the
same work), and on CPU it computes attention with explicit matmul + softmax (it calls torch's
scaled_dot_product_attention on GPUs only), where nmt calls the latter.

Batches: nmt's batch_tokens=2048 caps n * max(longest source, longest target) of a batch, both
sides counted with BOS and EOS (nmt.data.batching). OpenNMT-py's batch_type=tokens caps n * max
over the batch of max(len(src_ids), len(tgt_ids)), padding included, where tgt_ids hold BOS and EOS
but src_ids neither; so the source lines given to it carry BOS and EOS as text (<s> ... </s>, which
its vocabulary maps to those ids): both then count the same padded slots against the same 2,048,
and the encoder sees the same tensor lengths. OpenNMT-py sorts each bucket of --bucket examples
(default: nmt's pool of about 100 batches) by (source, target) length and cuts it into batches;
nmt sorts its pools by max(source, target). The "target tokens/step" rows show how close they come.

Target tokens/s, the same on both sides: non-pad target labels (each sentence's pieces + EOS, no
BOS: nmt's Batch.num_tgt_tokens, OpenNMT-py's Statistics.n_words) over wall-clock time, batch
loading included, in windows of --window steps (nmt's metrics.jsonl records, OpenNMT-py's
report_every statistics, read from its Statistics objects). A run's figure is the mean over its
windows after the first --warmup steps; the table gives the median over rounds, which alternate
nmt, OpenNMT-py, nmt, ... Each run is a fresh process with the same number of torch threads;
OpenNMT-py loads batches in its training process (num_workers 0: its default of 2 loader
processes would compete with the two compute threads on a 2-core machine), nmt in a thread.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from common import REPO, joint_tokenizer, load_multi30k, median

RECIPE = REPO / "configs" / "multi30k_de_en.yaml"
# Imported by OpenNMT-py's transforms package at start-up, used only by transforms this run leaves out.
UNUSED_IMPORTS = ("spacy", "ahocorasick", "rapidfuzz", "fasttext")


def prepare(folder: Path, tokenizer, cfg) -> dict:
    """Write OpenNMT-py's corpus and vocabulary; the numbers both sides are checked against."""
    from nmt.data.batching import TokenBatchSampler, filter_by_length
    from nmt.data.encoded import encode_corpus
    from nmt.model import Transformer
    from nmt.model.transformer import count_parameters

    corpus = encode_corpus(load_multi30k("train"), tokenizer.encode_batch, tokenizer.encode_batch)
    keep, _ = filter_by_length(
        corpus.src_lengths(),
        corpus.tgt_lengths(),
        max_src_len=cfg.data.max_src_len,
        max_tgt_len=cfg.data.max_tgt_len,
        max_ratio=cfg.data.max_ratio,
    )
    specials = {tokenizer.start_id: "<s>", tokenizer.eos_id: "</s>"}  # OpenNMT-py's spelling of BOS, EOS
    for side, seqs in (("src", corpus.src), ("tgt", corpus.tgt)):
        with open(folder / f"train.{side}", "w", encoding="utf-8") as f:
            for i in keep:
                pieces = [specials.get(int(t), p) for t, p in zip(seqs[i], tokenizer.lookup(seqs[i]), strict=True)]
                # OpenNMT-py adds BOS and EOS to the target itself; the source keeps them (see above).
                f.write(" ".join(pieces if side == "src" else pieces[1:-1]) + "\n")
    pieces = tokenizer.lookup(range(4, tokenizer.vocab_size))  # nmt's 4 specials: pad, unk, bos, eos
    if len(set(pieces)) != len(pieces) or {"<unk>", "<blank>", "<s>", "</s>"} & set(pieces):
        raise ValueError("the BPE pieces would not map one-to-one onto OpenNMT-py's vocabulary")
    (folder / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")

    src_len, tgt_len = corpus.src_lengths()[keep], corpus.tgt_lengths()[keep]
    sampler = TokenBatchSampler(src_len, tgt_len, max_tokens=cfg.train.batch_tokens, seed=cfg.train.seed)
    batches = sampler.batches(0)
    model = Transformer(cfg.model.build(tokenizer.vocab_size, tokenizer.vocab_size, joint_vocabulary=True))
    return {
        "pairs": len(keep),
        "pool": sampler.pool_size,
        "nmt_params": count_parameters(model),
        "nmt_tokens_per_step": float((tgt_len - 1).sum()) / len(batches),  # one epoch's batches
    }


def onmt_config(folder: Path, cfg, args, steps: int) -> Path:
    """OpenNMT-py's options for the recipe's model, optimiser and batches (an onmt_train YAML)."""
    vocab = cfg.tokenizer.vocab_size  # only the dimensions are read here
    model = cfg.model.build(vocab, vocab, joint_vocabulary=True)
    train = cfg.train
    options = {
        "data": {"corpus_1": {"path_src": str(folder / "train.src"), "path_tgt": str(folder / "train.tgt")}},
        "src_vocab": str(folder / "vocab.txt"),
        "tgt_vocab": str(folder / "vocab.txt"),
        "share_vocab": True,
        "save_model": str(folder / "onmt_model"),  # written once, after the timed steps
        "save_checkpoint_steps": 10**9,
        "valid_steps": 10**9,
        "train_steps": steps,
        "report_every": args.window,
        "seed": train.seed,
        "num_workers": 0,
        "bucket_size": args.bucket,
        "batch_type": "tokens",
        "batch_size": train.batch_tokens,
        "normalization": "tokens",
        "accum_count": [train.accumulate],
        "encoder_type": "transformer",
        "decoder_type": "transformer",
        "enc_layers": model.encoder_layers,
        "dec_layers": model.decoder_layers,
        "hidden_size": model.d_model,
        "word_vec_size": model.d_model,
        "heads": model.num_heads,
        "transformer_ff": model.d_ff,
        "pos_ffn_activation_fn": model.activation,
        "dropout": [model.dropout],
        "attention_dropout": [model.attention_dropout],
        "position_encoding": True,
        "position_encoding_type": "SinusoidalInterleaved",
        "share_embeddings": model.sharing == "all",
        "share_decoder_embeddings": model.sharing in ("all", "tgt_out"),
        "add_qkvbias": True,
        "add_ffnbias": True,
        "norm_eps": model.layer_norm_eps,
        "param_init": 0.0,
        "param_init_glorot": True,
        "optim": "adam",
        "adam_beta1": train.adam_betas[0],
        "adam_beta2": train.adam_betas[1],
        "learning_rate": train.lr_scale,
        "decay_method": "noam",
        "warmup_steps": train.warmup,
        "max_grad_norm": train.clip_norm,
        "label_smoothing": train.label_smoothing,
    }
    path = folder / "onmt.yaml"
    path.write_text(json.dumps(options, indent=1))  # JSON is YAML
    return path


def onmt_child(config: str, stats: str, threads: int) -> None:
    """Run onmt_train in this process, recording its parameter count and report windows to `stats`."""
    for name in UNUSED_IMPORTS:
        if importlib.util.find_spec(name) is None:
            stub = types.ModuleType(name)
            stub.__getattr__ = lambda attr: None  # `from rapidfuzz import fuzz` must not fail
            sys.modules[name] = stub
    import torch

    torch.set_num_threads(threads)
    import onmt.train_single
    from onmt.bin.train import main as onmt_train
    from onmt.utils.statistics import Statistics

    with open(stats, "a") as log:

        def record(**values) -> None:
            print(json.dumps(values), file=log, flush=True)

        build_model = onmt.train_single.build_model

        def counting_build_model(*a, **k):
            model = build_model(*a, **k)
            record(params=sum(p.numel() for p in model.parameters()))  # a shared matrix counts once
            return model

        output = Statistics.output

        def recording_output(self, step, *rest):
            record(step=step, tokens=self.n_words, batches=self.n_batchs, time=self.elapsed_time())
            output(self, step, *rest)

        onmt.train_single.build_model = counting_build_model
        Statistics.output = recording_output
        sys.argv = ["onmt_train", "-config", config]
        onmt_train()


def run(cmd: list[str], log: Path, env: dict | None = None) -> None:
    """Run a training process with its output in `log`; if it fails, stop with the end of that output."""
    with open(log, "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if code:
        tail = "".join(log.read_text().splitlines(True)[-30:])
        sys.exit(f"{' '.join(cmd[1:4])} ... failed (exit {code}); its last lines:\n{tail}")


def run_nmt(folder: Path, tokenizer, args, steps: int, placement: str = "threads", precision: str = "auto") -> float:
    """placement "threads": one process of --threads threads; "processes": nmt's default on CPU
    (train.processes=auto: one single-threaded worker per core, splitting each batch). `precision`:
    train.precision (auto: bf16 where the CPU has bf16 units, see nmt.training.precision)."""
    from nmt.tokenizer import save_tokenizers

    out = folder / "nmt_run"
    out.mkdir()
    save_tokenizers(tokenizer, tokenizer, out)  # found there, used as is: the text OpenNMT-py reads
    overrides = [
        "train.device=cpu",  # also on a GPU machine's host: this is a CPU benchmark
        "train.tune_decoding=false",
        f"train.max_steps={steps}",
        f"train.log_every={args.window}",
        *([f"train.threads={args.threads}"] if placement == "threads" else ["train.processes=auto"]),
        "train.valid_every=1000000",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
        f"train.precision={precision}",
    ]
    cmd = [sys.executable, "-m", "nmt", "train", str(RECIPE), "--out", str(out), "--quiet", "--set", *overrides]
    run(cmd, folder / "nmt.log")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in records if r["kind"] == "train" and r["step"] - args.window >= args.warmup]
    shutil.rmtree(out)  # the next round starts from nothing
    return statistics.mean(rates)


def run_onmt(folder: Path, args, config: Path) -> tuple[float, float, int]:
    stats = folder / "onmt_stats.jsonl"
    stats.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), args.onmt_site]))}
    cmd = [sys.executable, __file__, "--onmt-child", str(config), str(stats), "--threads", str(args.threads)]
    run(cmd, folder / "onmt.log", env)
    records = [json.loads(line) for line in stats.read_text().splitlines()]
    windows = [r for r in records if "step" in r and r["step"] - args.window >= args.warmup]
    params = next(r["params"] for r in records if "params" in r)
    rate = statistics.mean(r["tokens"] / r["time"] for r in windows)
    per_step = sum(r["tokens"] for r in windows) / sum(r["batches"] for r in windows)
    return rate, per_step, params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=20, help="steps run before the timed ones (whole windows)")
    parser.add_argument("--window", type=int, default=10, help="steps per logged window")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads on both sides")
    parser.add_argument("--bucket", type=int, default=None, help="OpenNMT-py's bucket_size (default: nmt's pool)")
    parser.add_argument("--onmt-site", default="/work/onmt/site", help="where OpenNMT-py was pip-installed")
    parser.add_argument(
        "--precisions",
        default="auto",
        help="nmt's train.precision values to time in one process each, comma-separated (e.g. fp32,bf16)",
    )
    parser.add_argument("--no-workers", action="store_true", help="leave out nmt's default worker processes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--onmt-child", nargs=2, metavar=("CONFIG", "STATS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.onmt_child:
        return onmt_child(*args.onmt_child, args.threads)
    if args.warmup < args.window or args.warmup % args.window or args.steps % args.window:
        parser.error("--warmup and --steps must be multiples of --window, --warmup at least one")

    from nmt.config import load_config

    cfg = load_config(RECIPE)
    tokenizer = joint_tokenizer(Path(tempfile.gettempdir()) / "nmt_bench_tokenizer", cfg.tokenizer.vocab_size)
    with tempfile.TemporaryDirectory(prefix="opennmt_speed_") as tmp:
        folder = Path(tmp)
        facts = prepare(folder, tokenizer, cfg)
        args.bucket = args.bucket or facts["pool"]
        config = onmt_config(folder, cfg, args, args.warmup + args.steps)
        precisions = list(dict.fromkeys(p.strip() for p in args.precisions.split(",")))
        nmt_rates: dict[str, list[float]] = {p: [] for p in precisions}
        default_rates, onmt_rates = [], []
        for _ in range(args.rounds):
            for precision in precisions:
                nmt_rates[precision].append(
                    run_nmt(folder, tokenizer, args, args.warmup + args.steps, "threads", precision)
                )
            if not args.no_workers:
                default_rates.append(run_nmt(folder, tokenizer, args, args.warmup + args.steps, "processes"))
            rate, onmt_per_step, onmt_params = run_onmt(folder, args, config)
            onmt_rates.append(rate)
    result = {
        "threads": args.threads,
        "timed_steps": args.steps,
        "training_pairs": facts["pairs"],
        "nmt_params": facts["nmt_params"],
        "opennmt_params": onmt_params,
        "nmt_target_tokens_per_step": facts["nmt_tokens_per_step"],
        "opennmt_target_tokens_per_step": onmt_per_step,
        "opennmt_tokens_per_s": median(onmt_rates),
        "opennmt_rounds": onmt_rates,
    }
    for precision, rates in nmt_rates.items():
        name = "nmt" if precision == "auto" else f"nmt_{precision}"
        result[f"{name}_tokens_per_s"] = median(rates)
        result[f"{name}_over_opennmt"] = median(rates) / median(onmt_rates)
        result[f"{name}_rounds"] = rates
    if default_rates:
        result["nmt_workers_tokens_per_s"] = median(default_rates)
        result["nmt_workers_over_opennmt"] = median(default_rates) / median(onmt_rates)
        result["nmt_workers_rounds"] = default_rates
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            shown = [round(v) for v in value] if isinstance(value, list) else value
            print(f"{key:32s} {round(shown, 3) if isinstance(shown, float) else shown}")


if __name__ == "__main__":
    main()
