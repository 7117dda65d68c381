"""Two `nmt train` runs started together on an empty shared cache both finish.

Each run has its own --out, but they share NMT_DATA_HOME: the download cache
and the encoded-data cache. The training pairs are the 300 of ``tiny_corpus``
(full Multi30k would take a minute on a busy machine); the validation split is
Multi30k's, served by test_registry's fake upstream as an http mirror that
stalls the first download until the other run queues behind it, so the two
really do meet in the download code every time.
"""

import os
import subprocess
import sys

from test_registry import FakeUpstream, race, serving

from nmt.data.registry import MULTI30K

from conftest import TINY_TRAINING

ONE_STEP = [
    "train.max_steps=1",
    "train.valid_every=100000",
    "train.valid_bleu_sentences=0",
    "train.best_metric=loss",
    "train.tune_decoding=false",
]


def test_two_training_runs_on_an_empty_cache_both_finish(multi30k_dir, tiny_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    home = tmp_path / "data_home"  # does not exist yet
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    train_files = [f"data.train_src={tiny_corpus / 'train.de'}", f"data.train_tgt={tiny_corpus / 'train.en'}"]
    sets = [x for o in TINY_TRAINING + ONE_STEP + train_files for x in ("--set", o)]
    valid = {MULTI30K.files[("val", lang)].relpath for lang in ("de", "en")}
    with serving(FakeUpstream({relpath: (multi30k_dir / relpath).read_bytes() for relpath in valid})) as mirror:
        env = {**os.environ, "NMT_DATA_HOME": str(home), "NMT_MIRROR": f"{mirror.url}/multi30k"}
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "nmt", "train", str(config), "--out", str(tmp_path / out), "--quiet", *sets],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for out in ("a", "b")
        ]
        stderr = race(mirror, procs)

    assert [p.returncode for p in procs] == [0, 0], stderr
    assert sorted(path for path, _ in mirror.requests) == sorted(f"/multi30k/{relpath}" for relpath in valid)
    # The shared cache holds data only: no .part, .lock or temporary file left behind.
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert [p for p in left if not p.startswith("encoded/")] == sorted(f"multi30k/{relpath}" for relpath in valid)
    encoded = [p for p in left if p.startswith("encoded/")]  # encoded corpora, and their word alignments
    assert encoded and all(p.endswith((".enc", ".links")) for p in encoded)
