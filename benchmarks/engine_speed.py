"""Translation engines side by side on Multi30k test_2016_flickr (1,000 sentences, text in -> text out).

    python benchmarks/engine_speed.py --model runs/de_en_20m [--rounds 3] [--busy] [--memory] [--one-core] [--json]

Settings, each timed for greedy and beam 5 with the model loaded, in alternating rounds (the
median of each is reported, with its range), with its cased sacreBLEU for beam 5:
- nmt fp32 1x2:        nmt's engine, one worker with 2 intra-op threads (the old way)
- nmt fp32 / int8:     nmt's engine, default workers (one single-threaded worker per core: the
                       calling thread and worker processes, timed once they are ready)
- nmt fp32/int8 threads: the same with every worker a thread of this process (worker_processes=False)
- nmt int8 threads fbgemm: "nmt int8 threads" with every call in fbgemm's kernels, where nmt sends
                       large ones to oneDNN's AMX kernels (nmt.inference.int8_linear; the same as
                       "nmt int8 threads" on CPUs without AMX)
- nmt int8 threads fp32 keys: "nmt int8 threads" with the decoder's keys and values kept in fp32, where
                       nmt keeps them in bf16 on CPUs with AMX (nmt.inference.precision.keep_decoder_keys_in;
                       the same as "nmt int8 threads" on other CPUs)
- nmt fp32 mkl:        the same, with the output projection left to MKL where nmt would pack it
                       for oneDNN (nmt.inference.packed_linear; the same as "nmt fp32" on other CPUs)
- nmt->ct2 fp32/int8:  `Translator(engine="ctranslate2")`: nmt's tokenisation, per-sentence limits
                       and GNMT re-ranking around CTranslate2
- ct2 fp32 / int8:     CTranslate2 called directly the way its documentation suggests (one
                       translate_batch call, sorted token batches, its own length penalty 0.6,
                       one limit for all), same tokenizer, same weights, same workers
--one-core runs every setting on one worker of one thread (CTranslate2 too): each engine's speed per
core, without the sharing of a call between workers ("nmt fp32 1x2", two threads by definition, is
left out; --memory measures one worker of one thread too).
--busy runs a competing `python -c 'while True: pass'` process throughout (one core taken).
--memory adds the peak resident memory of `nmt translate` for each engine (fresh processes; summed
over nmt's worker processes, sampled every 20 ms).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nmt.evaluation import score_translations
from nmt.inference import precision
from nmt.inference.export_ctranslate2 import export_ctranslate2, require_ctranslate2, vocabulary
from nmt.inference.packed_linear import unpack_output_projection
from nmt.translator import Translator

from common import load_multi30k, median, timed, tree_rss_kib


def direct_ctranslate2(ct2_dir: Path, translator: Translator, compute_type: str, workers: int):
    """A function translating texts with CTranslate2 alone (nmt's tokenizer only for the pieces)."""
    ctranslate2 = require_ctranslate2()
    engine = ctranslate2.Translator(str(ct2_dir), compute_type=compute_type, inter_threads=workers, intra_threads=1)
    src_vocab = vocabulary(translator.src_tokenizer)
    tgt_ids = {piece: i for i, piece in enumerate(vocabulary(translator.tgt_tokenizer))}
    decode = translator.decode

    def translate(texts: list[str], beam: int) -> list[str]:
        tokens = [[src_vocab[i] for i in translator.encode_source(t)[0]] for t in texts]
        results = engine.translate_batch(
            tokens,
            beam_size=beam,
            max_batch_size=decode.batch_tokens // beam,
            batch_type="tokens",
            length_penalty=decode.length_penalty,
            max_decoding_length=int(decode.max_len_a * max(map(len, tokens))) + decode.max_len_b,
        )
        return [translator.tgt_tokenizer.decode([tgt_ids[p] for p in r.hypotheses[0]]) for r in results]

    return translate


def peak_memory_mib(command: list[str], stdin_path: Path) -> float:
    """Peak resident memory of one command run to completion, summed over its processes (sampled
    every 20 ms: the command and any worker processes it starts)."""
    with open(stdin_path, "rb") as source:
        process = subprocess.Popen(command, stdin=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak = 0
        while process.poll() is None:
            peak = max(peak, tree_rss_kib(process.pid))
            time.sleep(0.02)
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    return peak / 1024


def unpacked(translator: Translator) -> Translator:
    """The translator with its output projection left to MKL (see nmt.inference.packed_linear)."""
    unpack_output_projection(translator.model)
    return translator


def fp32_keys(translator: Translator) -> Translator:
    """The translator with its decoder's keys and values kept in fp32 (in this process)."""
    precision.keep_decoder_keys_in(translator.model, None)
    return translator


def fbgemm_only(load):
    """What `load()` returns, with its int8 layers left to fbgemm's kernels alone (in this process)."""
    chosen = precision.amx_int8_available
    precision.amx_int8_available = lambda: False
    try:
        return load()
    finally:
        precision.amx_int8_available = chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians reported)")
    parser.add_argument("--busy", action="store_true", help="run a competing busy process throughout")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory of `nmt translate`")
    parser.add_argument("--one-core", action="store_true", help="every setting on one worker of one thread")
    parser.add_argument("--only", help="comma-separated setting names to run (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    pairs = load_multi30k("test_2016_flickr")
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    cores = 1 if args.one_core else len(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="engine-speed-"))
    ct2_dir = export_ctranslate2(args.model, tmp / "ct2")

    load_model = functools.partial(Translator.load, workers=1, threads=1) if args.one_core else Translator.load
    model = args.model
    loaders = {  # only the settings asked for are loaded: see the note on engines sharing a process below
        "nmt fp32 1x2": lambda: load_model(model, device="cpu", precision="fp32", workers=1, threads=cores),
        "nmt fp32": lambda: load_model(model, device="cpu", precision="fp32"),
        "nmt int8": lambda: load_model(model, device="cpu", precision="int8"),
        "nmt fp32 threads": lambda: load_model(model, device="cpu", precision="fp32", worker_processes=False),
        "nmt int8 threads": lambda: load_model(model, device="cpu", precision="int8", worker_processes=False),
        "nmt int8 threads fbgemm": lambda: fbgemm_only(
            lambda: load_model(model, device="cpu", precision="int8", worker_processes=False)
        ),
        "nmt int8 threads fp32 keys": lambda: fp32_keys(
            load_model(model, device="cpu", precision="int8", worker_processes=False)
        ),
        "nmt->ct2 fp32": lambda: load_model(ct2_dir, engine="ctranslate2", device="cpu", precision="fp32"),
        "nmt->ct2 int8": lambda: load_model(ct2_dir, engine="ctranslate2", device="cpu", precision="int8"),
        "nmt fp32 mkl": lambda: unpacked(load_model(model, device="cpu", precision="fp32", worker_processes=False)),
    }
    wanted = args.only.split(",") if args.only else list(loaders) + ["ct2 fp32", "ct2 int8"]
    if args.one_core:  # one thread of one worker is "nmt fp32" itself
        if args.only and "nmt fp32 1x2" in wanted:
            parser.error('--one-core runs one thread: "nmt fp32 1x2" (two) cannot run under it')
        wanted = [name for name in wanted if name != "nmt fp32 1x2"]
    settings = {name: load() for name, load in loaders.items() if name in wanted}
    # Worker processes start now (in the background) and are ready before the timing.
    for translator in settings.values():
        translator.start_workers()
    translators = list(settings.values())
    settings = {name: (lambda texts, beam, t=t: t.translate(texts, beam=beam)) for name, t in settings.items()}
    reference = Translator.load(args.model, device="cpu", precision="fp32", workers=1, threads=1)
    for name, compute_type in (("ct2 fp32", "float32"), ("ct2 int8", "int8_float32")):
        if name in wanted:
            settings[name] = direct_ctranslate2(ct2_dir, reference, compute_type, cores)

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        times: dict[str, dict[str, list[float]]] = {name: {"greedy": [], "beam5": []} for name in settings}
        outputs: dict[str, list[str]] = {}
        for fn in settings.values():
            fn(sources[:50], 5)  # warm-up
        for translator in translators:
            translator.start_workers(wait=True)
        for _ in range(args.rounds):
            for name, fn in settings.items():
                for key, beam in (("greedy", 1), ("beam5", 5)):
                    times[name][key] += timed(
                        lambda name=name, key=key, fn=fn, beam=beam: outputs.__setitem__(
                            (name, key), fn(sources, beam)
                        ),
                        1,
                    )
    finally:
        if busy is not None:
            busy.kill()

    result = {"sentences": len(sources), "cores": cores, "busy_competitor": args.busy, "rounds": args.rounds}
    for name in settings:
        row = {key: round(median(values), 3) for key, values in times[name].items()}
        if args.rounds > 1:  # a median comes with its range
            row.update({f"{key}_range": (round(min(v), 3), round(max(v), 3)) for key, v in times[name].items()})
        row["bleu_beam5"] = round(score_translations(outputs[(name, "beam5")], references).bleu, 2)
        if ("nmt fp32", "beam5") in outputs:  # --only may leave it out
            row["same_beam5_text_as_nmt_fp32"] = sum(
                a == b for a, b in zip(outputs[(name, "beam5")], outputs[("nmt fp32", "beam5")], strict=True)
            )
        result[name] = row

    if args.memory:
        (tmp / "src.txt").write_text("\n".join(sources) + "\n")
        nmt = [sys.executable, "-m", "nmt", "translate", "--beam", "5"]
        if args.one_core:
            nmt += ["--workers", "1", "--threads", "1"]
        for name, options in (
            ("nmt fp32", ["--model", args.model, "--precision", "fp32"]),
            ("nmt int8", ["--model", args.model, "--precision", "int8"]),
            ("nmt->ct2 fp32", ["--model", str(ct2_dir), "--engine", "ctranslate2", "--precision", "fp32"]),
            ("nmt->ct2 int8", ["--model", str(ct2_dir), "--engine", "ctranslate2", "--precision", "int8"]),
        ):
            result.setdefault(name, {})["peak_rss_mib"] = round(peak_memory_mib(nmt + options, tmp / "src.txt"), 1)

    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:16s} {value}")


if __name__ == "__main__":
    main()
