"""An OPUS-MT-shaped Marian model: the cost of importing it, then decoding speed side by side.

    python benchmarks/marian_speed.py [--sentences 200] [--max-new 48] [--rounds 3] [--json]

The model is a seeded random MarianMTModel of OPUS-MT's base shape (6+6 layers, d_model 512,
8 heads, d_ff 2048, swish, scaled embeddings, one shared 58,101-piece vocabulary), saved as
transformers saves it, with SentencePiece models trained on Multi30k train (6,000 pieces a side)
and the vocabulary filled up to OPUS-MT's size with pieces no input produces. A random model
never says </s>, so every engine decodes every sentence to the same cap (--max-new tokens): the
comparison is of the same work. Greedy outputs are compared with transformers' (count equal).

Timed, text in and text out, on Multi30k test_2016_flickr German sources, the median of --rounds:
- import:            `nmt import --from marian` in a fresh process: wall time and peak RSS
- transformers:      MarianTokenizer + MarianMTModel.generate (fp32, torch's threads), batches of
                     32 sentences sorted by length, in this process among the others
- transformers alone: the same in a fresh process each round, after one warm-up batch, nothing of
                     the other settings loaded in it (the baseline the ratios are taken against:
                     transformers measures slower inside this process than alone)
- nmt fp32 / int8:   Translator.load(imported) with its default engine settings
- nmt->ct2 fp32/int8: Translator.load(imported, engine="ctranslate2"): nmt's export, nmt's tokenisation
- ct2 fp32 / int8:   CTranslate2's own converter on the original, translate_batch called directly
                     (sorted token batches), the Hugging Face tokenizer around it
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from common import REPO, load_multi30k, median

sys.path.insert(0, str(REPO / "tests"))
from marian_models import marian_vocab, train_spm  # noqa: E402

OPUS_VOCAB = 58101


def build_model(folder: Path) -> Path:
    """The random base-size Marian directory (built once per run)."""
    from transformers import MarianConfig, MarianMTModel

    pairs = load_multi30k("train")
    src_spm = train_spm([s for s, _ in pairs], folder / "src", 6000)
    tgt_spm = train_spm([t for _, t in pairs], folder / "tgt", 6000)
    vocab = marian_vocab(src_spm, tgt_spm)
    pad = vocab.pop("<pad>")
    for i in range(pad, OPUS_VOCAB - 1):
        vocab[f"\u2581unused{i}"] = i  # pieces no input produces: the table is OPUS-MT's size
    vocab["<pad>"] = OPUS_VOCAB - 1
    out = folder / "hf"
    out.mkdir()
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (out / "source.spm").write_bytes(src_spm.read_bytes())
    (out / "target.spm").write_bytes(tgt_spm.read_bytes())
    (out / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}))
    config = MarianConfig(
        vocab_size=OPUS_VOCAB,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=OPUS_VOCAB - 1,
        decoder_start_token_id=OPUS_VOCAB - 1,
        eos_token_id=0,
        forced_eos_token_id=0,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.model.decoder.embed_tokens.weight[OPUS_VOCAB - 1].zero_()  # OPUS-MT's start row
    model.save_pretrained(out)
    return out


def capped_decode(max_new: int):
    """transformers' search as the benchmark runs it (early_stopping=True, no min_length), every
    output capped at `max_new` tokens: nmt's engines set to do the same work."""
    from nmt.config import DecodeConfig

    return DecodeConfig(
        beam=1,
        length_penalty=1.0,
        length_normalization="average",
        max_len_a=0,
        max_len_b=max_new,
        min_len=0,
        early_stopping=True,
    )


def import_cost(hf_dir: Path, out: Path) -> dict:
    """`nmt import` in a fresh process: seconds and peak resident memory (MiB)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nmt", "import", "--from", "marian", str(hf_dir), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(peak_kib / 1024)}


def run_transformers(hf_dir: Path, sources: list[str], beam: int, max_new: int):
    """(a function that translates every source, the list it fills with the outputs)."""
    from transformers import MarianMTModel, MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(hf_dir)
    model = MarianMTModel.from_pretrained(hf_dir).eval()
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out = [""] * len(sources)

    def translate() -> None:
        for start in range(0, len(order), 32):
            rows = order[start : start + 32]
            with torch.no_grad():
                inputs = tokenizer([sources[i] for i in rows], return_tensors="pt", padding=True)
                generated = model.generate(
                    **inputs, num_beams=beam, max_new_tokens=max_new, forced_eos_token_id=None, early_stopping=True
                )
            for i, text in zip(rows, tokenizer.batch_decode(generated, skip_special_tokens=True), strict=True):
                out[i] = text

    return translate, out


CHILD = "--transformers-alone"  # this script, run as the fresh process that times transformers


def transformers_alone(hf_dir: Path, sources: list[str], beam: int, max_new: int) -> tuple[float, list[str]]:
    """transformers timed in a fresh process of its own: (seconds, outputs)."""
    job = json.dumps({"hf_dir": str(hf_dir), "sources": sources, "beam": beam, "max_new": max_new})
    done = subprocess.run(
        [sys.executable, __file__, CHILD],
        input=job,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    return found["seconds"], found["outputs"]


def time_transformers_alone() -> None:
    """The child's side: load, warm up on one batch, then time every source once."""
    job = json.loads(sys.stdin.read())
    warm_up, _ = run_transformers(Path(job["hf_dir"]), job["sources"][:8], job["beam"], job["max_new"])
    warm_up()
    translate, out = run_transformers(Path(job["hf_dir"]), job["sources"], job["beam"], job["max_new"])
    start = time.perf_counter()
    translate()
    print(json.dumps({"seconds": time.perf_counter() - start, "outputs": out}))


def main() -> None:
    if sys.argv[1:] == [CHILD]:
        time_transformers_alone()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--max-new", type=int, default=48, help="the output cap, the same for every engine")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--beams", default="1,5", help="comma-separated beam sizes to time (default 1,5)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import ctranslate2

    from nmt.translator import Translator

    sources = [s for s, _ in load_multi30k("test_2016_flickr")][: args.sentences]
    results: dict = {"cpu": os.cpu_count(), "sentences": len(sources), "max_new": args.max_new}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hf_dir = build_model(folder)
        results["import"] = import_cost(hf_dir, folder / "nmt")
        converted = folder / "ct2"
        ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(converted))
        decode = capped_decode(args.max_new)
        from transformers import MarianTokenizer

        tokenizer = MarianTokenizer.from_pretrained(hf_dir)

        def nmt_setting(**options):
            translator = Translator.load(folder / "nmt", **options)
            translator.decode = translator.engine.decode = decode  # the output cap, in either engine
            translator.start_workers(wait=True)
            return translator

        def ct2_setting(compute_type: str):
            torch_threads = torch.get_num_threads()
            model = ctranslate2.Translator(str(converted), compute_type=compute_type, inter_threads=os.cpu_count())
            torch.set_num_threads(torch_threads)  # CTranslate2 sets the OpenMP count that torch shares
            return model

        beams = [int(b) for b in args.beams.split(",")]
        for beam in beams:
            timings, outputs = {}, {}
            hf_translate, hf_out = run_transformers(hf_dir, sources, beam, args.max_new)
            settings = {
                "transformers alone": None,
                "transformers fp32": hf_translate,
                "nmt fp32": nmt_setting(),
                "nmt int8": nmt_setting(precision="int8"),
                "nmt->ct2 fp32": nmt_setting(engine="ctranslate2"),
                "nmt->ct2 int8": nmt_setting(engine="ctranslate2", precision="int8"),
                "ct2 fp32": ct2_setting("float32"),
                "ct2 int8": ct2_setting("int8_float32"),
            }
            for _ in range(args.rounds):  # alternating rounds: a slow spell hits every setting alike
                for name, setting in settings.items():
                    if name == "transformers alone":
                        seconds, outputs[name] = transformers_alone(hf_dir, sources, beam, args.max_new)
                        timings.setdefault(name, []).append(seconds)
                        continue
                    start = time.perf_counter()
                    if name.startswith("transformers"):
                        setting()
                        outputs[name] = list(hf_out)
                    elif name.startswith("ct2"):
                        # text to text, as every other setting: the tokenisation is timed too
                        src_tokens = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in sources]
                        found = setting.translate_batch(
                            src_tokens,
                            beam_size=beam,
                            max_decoding_length=args.max_new,
                            max_batch_size=2048,
                            batch_type="tokens",
                        )
                        outputs[name] = [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in found]
                    else:
                        outputs[name] = setting.translate(sources, beam=beam)
                    timings.setdefault(name, []).append(time.perf_counter() - start)
            reference = outputs["transformers alone"]
            results[f"beam {beam}"] = {
                name: {
                    "seconds": round(median(times), 2),
                    "sentences_per_s": round(len(sources) / median(times), 1),
                    "vs_transformers": round(median(timings["transformers alone"]) / median(times), 2),
                    "same_as_transformers": sum(a == b for a, b in zip(outputs[name], reference, strict=True)),
                }
                for name, times in timings.items()
            }
            for setting in settings.values():
                if setting is not None and hasattr(setting, "close"):
                    setting.close()
    if args.json:
        print(json.dumps(results))
        return
    print(f"{results['sentences']} sentences, {results['max_new']} tokens each, {results['cpu']} cores")
    print(f"import: {results['import']['seconds']} s, peak RSS {results['import']['peak_rss_mib']} MiB")
    for beam in beams:
        print(f"\nbeam {beam}: setting | s | sentences/s | x transformers alone | outputs equal to its'")
        for name, row in results[f"beam {beam}"].items():
            print(
                f"  {name:18s} {row['seconds']:7.2f} {row['sentences_per_s']:8.1f} {row['vs_transformers']:6.2f}x"
                f" {row['same_as_transformers']:5d}"
            )


if __name__ == "__main__":
    main()
