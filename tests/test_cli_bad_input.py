"""Bad input to every `nmt` command: a non-zero exit status and one line on stderr,
`nmt COMMAND: error: ...`, that names what is wrong (the file, line, key or option); never a
traceback, never a bad value quietly accepted.

Each case is (argv, exit status, regex of the message). The argv and the regex name files
through {placeholders}, filled in from the `files` fixture: copies of the tiny model directory,
each damaged in one way, and small input files. A case whose fix belongs to a module that this
file does not test is marked xfail(strict=True) with the reason, so it fails loudly once fixed.
"""

import gzip
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.cli import main
from nmt.search_settings import MAX_BEAM

REPO = Path(__file__).resolve().parents[1]
COMMANDS = (
    "train",
    "distill",
    "shortlist",
    "truecaser",
    "info",
    "calibrate",
    "translate",
    "evaluate",
    "tune-length-penalty",
    "tune-precision",
    "data",
    "export",
    "import",
    "average",
    "serve",
    "plot",
    "attention",
    "positions",
)
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ ")  # the format main gives logging


def case(argv: str, status: int, message: str, xfail: str | None = None):
    """One row of the table; `xfail` says which module should refuse the input, and how."""
    marks = [pytest.mark.xfail(reason=xfail, strict=True)] if xfail else []
    return pytest.param(argv, status, message, marks=marks, id=argv or "(no command)")


def train(overrides: str, status: int = 2, message: str = "") -> object:
    """A `train` case that fails at the config, before any data or model work."""
    return case(f"train {{config}} --out {{new_dir}} --set {overrides}", status, "{config}: " + message)


GLOSSARY_REFUSED = r"a glossary \(--glossary\): the ctranslate2 engine cannot; nmt's engine can"

# --- argparse: usage errors (exit 2) -------------------------------------------------------------
USAGE = [
    case("", 2, "the following arguments are required: COMMAND"),
    case("frobnicate", 2, "invalid choice: 'frobnicate'"),
    case("translate", 2, "the following arguments are required: --model"),
    case("translate --model {model} --beam two", 2, "argument --beam: invalid int value: 'two'"),
    case(
        "export --model {model} --out {new_dir} --quantization int4",
        2,
        "argument --quantization: invalid choice: 'int4'",
    ),
]

# --- train: the config and the run directory -----------------------------------------------------
TRAIN = [
    train("train.clip_norm=-1", message="train.clip_norm must be > 0 or null, got -1"),
    train("train.lr_scale=-1", message="train.lr_scale must be > 0, got -1"),
    train("train.label_smoothing=1.5", message=r"train.label_smoothing must be in \[0, 1\), got 1.5"),
    train("train.max_steps=-5", message="train.max_steps must be >= 1 or null, got -5"),
    train("decode.beam=0", message="decode.beam must be between 1 and 256, got 0"),
    train("decode.max_len_a=-1", message="decode.max_len_a must be >= 0, got -1"),
    train("train.warmup=0", message="train.warmup must be >= 1, got 0"),
    train("train.adam_betas=[0.9]", message=r"train.adam_betas must be two numbers in \[0, 1\), got \[0.9\]"),
    train("train.device=tpu", message="train.device must be auto, cpu, cuda or cuda:N, got 'tpu'"),
    train("train.max_time=soon", message="train.max_time 'soon' is not a duration"),
    train("model.d_model=33", message=r"model.d_model \(33\) must be divisible by num_heads"),
    train("train.nope=1", message=r"unknown key\(s\) train.nope; valid keys in 'train': max_steps, "),
    train("nope.x=1", message=r"unknown section\(s\) \['nope'\]; valid sections: data, "),
    train("train.max_steps", message="override 'train.max_steps' must look like section.key=value"),
    train("train.max_steps=[1", message=r"override 'train.max_steps=\[1': the value is not valid YAML"),
    # Several values after one --set, and --set repeated: the last value is read too.
    train("train.max_steps=1 train.clip_norm=0", message="train.clip_norm must be > 0 or null, got 0"),
    train("train.max_steps=1 --set train.seed=-2", message=r"train.seed must be in \[0, 2\*\*63\), got -2"),
    case("train {no_file} --out {new_dir}", 2, "cannot read config {no_file}: No such file or directory"),
    case("train {config_latin1} --out {new_dir}", 2, "{config_latin1}:2: not valid UTF-8"),
    case("train {config_bad_yaml} --out {new_dir}", 2, "{config_bad_yaml}:3: not valid YAML"),
    case("train {empty_dir} --out {new_dir}", 2, "cannot read config {empty_dir}: Is a directory"),
    case("train --out {new_dir}", 2, r"give a CONFIG file \(or --resume with --out DIR\)"),
    case("train --resume --out {empty_dir}", 2, "--resume: {empty_dir}/config.yaml not found"),
    case("train --resume --out {cut_run}", 2, "{cut_run}/config.yaml is incomplete .*was it cut short"),
    case("train {config} --out {old_run}", 2, "{old_run} already holds a training run: add --resume"),
    case("train {config} --out {a_file}", 2, "--out {a_file} is a file"),
    case("data get", 2, r"nmt data get needs a corpus NAME \(see nmt data list\)"),
    # an option the command does not take: its own --help lists those it does
    case("translate --model {model} --bogus", 2, r"unrecognized arguments: --bogus \(see nmt translate --help\)"),
    case("data get nope", 2, "unknown corpus 'nope'; known corpora: multi30k, ted_hrlr, iwslt14, wmt14"),
    case("data get multi30k de-xx", 2, "multi30k has no language 'xx'; languages: en, de, fr, cs"),
    case("data list multi30k", 2, "nmt data list takes no corpus name"),
    case(
        "train {config} --out {new_dir} --init-from {missing}",
        2,
        "--init-from: model directory {missing} does not exist",
    ),
    case(
        "train {config} --out {old_run} --resume --init-from {old_run}",
        2,
        "--init-from starts a new run from a trained model; --resume continues a run: not both",
    ),
]

# --- every command that reads a model directory, on each kind of damaged one -----------------------
ON_MODEL = {
    "translate": "translate --model {m} --input {src}",
    "evaluate": "evaluate --model {m} --src {src} --ref {ref}",
    "export": "export --model {m} --out {new_dir}",
    "attention": "attention --model {m} Ein --out-dir {new_dir}",
    "serve": "serve --model {m} --port 0",
}
DAMAGES = {
    "missing": "model directory {missing} does not exist",
    "not_model": "{not_model} is not a model directory: model.json is missing",
    "wrong_types": "{wrong_types}/model.json: d_model must be int, got '32'",
    "cut_weights": "{cut_weights}/model.safetensors: not a readable safetensors weights file",
    "bad_decode": r"{bad_decode}/config.yaml: unknown key\(s\) decode.bogus",
}
MODEL_DIRS = [
    case(template.replace("{m}", "{" + damage + "}"), 2, message)
    for command, template in ON_MODEL.items()
    for damage, message in DAMAGES.items()
] + [
    case("average --model {missing}", 2, "model directory {missing} does not exist"),
    case("shortlist {missing}", 2, "MODEL_DIR: model directory {missing} does not exist"),  # as --help names it
    case("truecaser {missing}", 2, "MODEL_DIR: model directory {missing} does not exist"),
    case("average --model {not_model}", 2, "no checkpoints in {not_model}/checkpoints"),
    case("plot {missing}", 2, "{missing}/metrics.jsonl not found: train a model into"),
    case(
        "translate --model {model} --input {src} --weights {src}", 2, "{src}: not a readable safetensors weights file"
    ),
    case("translate --model {model} --input {src} --weights {no_file}", 2, "{no_file} is missing"),
]

# --- translate: options and input ------------------------------------------------------------------
TRANSLATE = "translate --model {model} --input {src} --output {new_dir}/out.txt"
TRANSLATE_CASES = [
    case(f"{TRANSLATE} --beam 0", 2, f"--beam must be between 1 and {MAX_BEAM}, got 0"),
    case(f"{TRANSLATE} --beam 1000", 2, f"--beam must be between 1 and {MAX_BEAM}, got 1000"),
    case(
        "translate --model {model} --input {src} --beam 251",
        2,
        r"beam \(251\) must be at most 250, half the target vocabulary",
    ),
    case(f"{TRANSLATE} --length-penalty -1", 2, "--length-penalty must be >= 0, got -1.0"),
    case(f"{TRANSLATE} --no-repeat-ngram-size -1", 2, "--no-repeat-ngram-size must be between 0 and 1024, got -1"),
    case(  # past a C size_t: CTranslate2 would fail on it with a TypeError
        f"{TRANSLATE} --no-repeat-ngram-size 99999999999999999999",
        2,
        "--no-repeat-ngram-size must be between 0 and 1024, got 99999999999999999999",
    ),
    case(f"{TRANSLATE} --length-penalty nan", 2, "--length-penalty must be a finite number, got nan"),
    case(f"{TRANSLATE} --length-penalty one", 2, "argument --length-penalty: invalid float value: 'one'"),
    case(f"{TRANSLATE} --min-len -1", 2, "argument --min-len: must be >= 0, got -1"),
    case(
        f"{TRANSLATE} --sample --length-penalty 1",
        2,
        "--length-penalty ranks beam search hypotheses: it does not apply to --sample",
    ),
    case(f"{TRANSLATE} --chunk 0", 2, "--chunk must be at least 1, got 0"),
    case(f"{TRANSLATE} --workers 0", 2, "--workers must be >= 1, got 0"),
    case(f"{TRANSLATE} --threads -1", 2, "--threads must be >= 1, got -1"),
    case(f"{TRANSLATE} --device tpu", 2, "--device must be auto, cpu, cuda or cuda:N, got 'tpu'"),
    case(f"{TRANSLATE} --device cuda:99", 2, r"--device cuda:99: this machine has \d+ CUDA device"),
    case(f"{TRANSLATE} --sample --beam 2", 2, "--sample draws one translation at random: leave out --beam"),
    case(f"{TRANSLATE} --top-k 5", 2, "--temperature and --top-k apply to --sample only"),
    case(f"{TRANSLATE} --seed 5", 2, "--seed to --sample or --qe-passes"),
    case(f"{TRANSLATE} --qe-passes 3", 2, r"--qe-passes averages the quality scores of --qe: .*got 3"),
    case(f"{TRANSLATE} --qe-report {{new_dir}}/r.csv", 2, r"--qe-report is for documents and web pages"),
    case(
        f"{TRANSLATE} --qe --qe-passes 3 --engine ctranslate2",
        2,
        r"MC dropout \(--qe-passes\): the ctranslate2 engine cannot; nmt's engine can",
    ),
    case(f"{TRANSLATE} --sample --temperature 0", 2, "--temperature must be > 0, got 0.0"),
    case(f"{TRANSLATE} --sample --top-k -1", 2, "--top-k must be >= 0 .*, got -1"),
    case(f"{TRANSLATE} --sample --temperature inf", 2, "temperature .*got inf"),
    case(f"{TRANSLATE} --sample --seed {2**70}", 2, f"seed .*got {2**70}"),
    case("translate --model {model} --input {no_file}", 2, "{no_file}: No such file or directory"),
    case("translate --model {model} --input {empty_dir}", 2, "{empty_dir}: Is a directory"),
    case(
        "translate --model {model} --input {src} --output {no_file}/out.txt",
        2,
        "{no_file}/out.txt: No such file or directory",
    ),
    case("translate --model {model} --input {latin1}", 2, "{latin1}:2: not valid UTF-8"),
]

# --- evaluate ---------------------------------------------------------------------------------------
EVALUATE = "evaluate --model {model}"
EVALUATE_CASES = [
    case(f"{EVALUATE} --src {{empty}} --ref {{empty}}", 2, "{empty} and {empty} are empty: no sentences"),
    case(f"{EVALUATE} --src {{src}} --ref {{one_line}}", 2, "{src} has 2 lines but {one_line} has 1"),
    case(f"{EVALUATE} --src {{no_file}} --ref {{ref}}", 2, "{no_file}: No such file or directory"),
    case(f"{EVALUATE} --src {{src}} --ref {{latin1}}", 2, "{latin1}:2: .*UTF-8"),
    case(f"{EVALUATE} --src {{src}}", 2, "give --src FILE and --ref FILE, or --test"),
    case(
        f"{EVALUATE} --test multi30k:test_2016_flickr:de-en --source-lang fr",
        2,
        "--source-lang fr is not the language of multi30k:test_2016_flickr:de-en's source \\(de\\)",
    ),
    case(
        f"{EVALUATE} --src {{src}} --ref {{ref}} --test multi30k:test_2016_flickr:de-en",
        2,
        "give --src FILE and --ref FILE, or --test CORPUS:SPLIT:SRC-TGT, not both",
    ),
    case(f"{EVALUATE} --src {{src}} --ref {{ref}} --beam 0", 2, "--beam must be between 1 and"),
    case(
        f"{EVALUATE} --src {{src}} --ref {{ref}} --length-penalty inf",
        2,
        "--length-penalty must be a finite number, got inf",
    ),
    case(f"{EVALUATE} --src {{src}} --ref {{ref}} --workers 0", 2, "--workers must be >= 1, got 0"),
    case(f"{EVALUATE} --test multi30k", 2, "--test 'multi30k' must look like multi30k:test_2016_flickr:de-en"),
    case(f"{EVALUATE} --test multi30k:test:de", 2, "--test 'multi30k:test:de' must look like"),
    case(f"{EVALUATE} --test nope:test_2016_flickr:de-en", 2, "unknown corpus 'nope'; known corpora: multi30k"),
    case(f"{EVALUATE} --test multi30k:nosplit:de-en", 2, "multi30k has no split 'nosplit'; splits: train"),
    case(f"{EVALUATE} --test multi30k:test_2016_flickr:de-xx", 2, "multi30k has no language 'xx'"),
]
TUNE = "tune-length-penalty --model {model}"
TUNE_CASES = [
    case(
        f"{TUNE} --src {{src}} --ref {{ref}} --alphas x", 2, "--alphas must be comma-separated numbers >= 0, .*got 'x'"
    ),
    case(f"{TUNE} --src {{src}} --ref {{ref}} --alphas 0.6,-1", 2, "--alphas must be .*got '0.6,-1'"),
    case(f"{TUNE} --src {{src}} --ref {{ref}} --beam 1", 2, r"greedy search \(beam 1\) has no length penalty"),
    case(f"{TUNE} --src {{src}}", 2, "give --src FILE and --ref FILE, or --test"),
    case(f"{TUNE} --src {{src}} --ref {{one_line}}", 2, "{src} has 2 lines but {one_line} has 1"),
]

# --- average, plot, serve, export, attention, positions ------------------------------------------------
OTHERS = [
    case("average --model {model} --last 0", 2, "--last must be at least 1, got 0"),
    case("average --model {model}", 2, "no checkpoints in {model}/checkpoints"),
    case(
        "average --model {cut_checkpoint}",
        2,
        "{cut_checkpoint}/checkpoints/step_00000010.safetensors: not a readable safetensors",
    ),
    case("plot {model}", 2, "{model}/metrics.jsonl not found: train a model into"),
    case("plot {torn_metrics}", 2, "{torn_metrics}/metrics.jsonl:2: not a metrics record"),
    case("plot {valid_only_metrics}", 2, "{valid_only_metrics}/metrics.jsonl: no train records to plot"),
    case("serve --model {model} --port 99999", 2, "--port must be between 0 and 65535, got 99999"),
    case("serve --model {model} --port -1", 2, "--port must be between 0 and 65535, got -1"),
    case("serve --model {model} --max-beam 0", 2, f"--max-beam must be between 1 and {MAX_BEAM}, got 0"),
    case("serve --model {model} --max-beam 1000", 2, f"--max-beam must be between 1 and {MAX_BEAM}, got 1000"),
    case("serve --model {model} --beam 9", 2, "--beam 9 is larger than --max-beam 8: the most a request may ask"),
    case("calibrate --model {model} --src {src} --ref {ref}", 2, "a calibration needs at least 10"),
    case("serve --model {model} --workers 0", 2, "--workers must be >= 1, got 0"),
    case("serve --model {model} --device tpu", 2, "--device must be auto, cpu, cuda or cuda:N"),
    case(
        "serve --model {model} --max-pending-sentences 8",
        2,
        r"--max-pending-sentences \(8\) must be at least --max-sentences \(64\)",
    ),
    case("serve --model {model} --max-sentences 0", 2, "max.sentences must be .*got 0"),
    case("export --model {model} --out {model}", 2, "--out {model} holds the model directory"),
    case(
        "distill --teacher {missing} --config {config} --out {new_dir}",
        2,
        "--teacher: model directory {missing} does not exist",
    ),
    case("distill --teacher {model} --config {config} --out {a_file}", 2, "--out {a_file} is a file"),
    case(
        "distill --teacher {model} --config {config} --out {model}",
        2,
        "--out {model} is the teacher's directory: give the student a directory of its own",
    ),
    case("export --model {model} --out {a_file}", 2, "{a_file} already exists: choose another --out"),
    case("attention --model {model} Ein --beam 0", 2, "--beam must be between 1 and"),
    case("attention --model {model} Ein --device tpu", 2, "--device must be auto, cpu, cuda or cuda:N"),
    case("positions --d-model 0 --out {new_dir}/p.png", 2, "need d_model >= 2 and length >= 1, got 0 and 100"),
    case("positions --length 0 --out {new_dir}/p.png", 2, "need d_model >= 2 and length >= 1, got 128 and 0"),
]

# --- import: a directory that is not a Marian model (the damaged Marian models: test_pretrained_marian) ---
IMPORT_CASES = [
    case("import --from marian {missing} --out {new_dir}", 2, "{missing}: not a directory"),
    case("import --from marian {model} --out {new_dir}", 2, "{model}/config.json: not found"),
    case("import --from marian {empty_dir} --out {model}", 2, "--out {model} already exists"),
    case("import {model} --out {new_dir}", 2, "the following arguments are required: --from"),
]

# --- real text: documents, pages, glossaries -------------------------------------------------------------
LONG_LINE = "a line of 10,000,001 bytes is longer than the 1,048,576 nmt takes: split it into paragraphs"
REAL_TEXT_CASES = [
    case("translate --model {model} --input {binary}", 2, "{binary}:2: not valid UTF-8"),
    case("translate --model {model} --input {docm}", 2, "{docm}: a macro-enabled Word document: save it as .docx"),
    case("translate --model {model} --input {pdf}", 2, "{pdf}: PDF cannot be written back with its layout"),
    case("translate --model {model} --input {binary} --format text", 2, "{binary}:2: not valid UTF-8"),
    case("translate --model {model} --input {binary} --format html", 2, "{binary}:2: not valid UTF-8"),
    case("translate --model {model} --input {huge_line}", 2, "{huge_line}:1: " + LONG_LINE),
    case("translate --model {model} --input {huge_line} --format text", 2, "{huge_line}:1: " + LONG_LINE),
    case("translate --model {model} --input {src} --glossary {empty}", 2, "{empty}: no terms \\(an empty glossary\\)"),
    case("translate --model {model} --input {src} --glossary {bad_tsv}", 2, "{bad_tsv}:2: expected 'source term<TAB>"),
    case("translate --model {model} --input {src} --glossary {latin1}", 2, "{latin1}:2: not UTF-8 text"),
    case("translate --model {model} --input {src} --glossary {no_file}", 2, "{no_file}: no such glossary file"),
    case("evaluate --model {model} --src {src} --ref {ref} --glossary {bad_tsv}", 2, "{bad_tsv}:2: expected"),
    case("serve --model {model} --glossary {bad_tsv}", 2, "{bad_tsv}:2: expected"),
    case("serve --model {model} --glossary {good_tsv} --engine ctranslate2", 2, GLOSSARY_REFUSED),
    case("translate --model {model} --input {src} --n-best 0", 2, "--n-best must be at least 1, got 0"),
    case("translate --model {model} --input {src} --n-best 2 --format text", 2, "--n-best lists each sentence"),
    # refused before the model is converted to CTranslate2 for the run
    case("translate --model {model} --glossary {good_tsv} --engine ctranslate2", 2, GLOSSARY_REFUSED),
    case(
        "translate --model {model} --sample --engine ctranslate2", 2, r"sampling \(--sample\): the ctranslate2 engine"
    ),
    case("translate --model {model} --input {src} --format text --scores", 2, "are per sentence: use them with"),
    case("translate --model {model} --input {src} --format html --glossary {good_tsv}", 2, "--glossary applies to"),
]

CASES = (
    USAGE + TRAIN + MODEL_DIRS + TRANSLATE_CASES + EVALUATE_CASES + TUNE_CASES + OTHERS + IMPORT_CASES + REAL_TEXT_CASES
)


# --- the files the cases name ------------------------------------------------------------------------
def damaged_copy(model_dir: Path, to: Path, damage=None) -> Path:
    """A copy of the tiny model directory, then `damage(copy)`."""
    shutil.copytree(model_dir, to)
    if damage is not None:
        damage(to)
    return to


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def cut_at_a_line_end(path: Path) -> None:
    """The first half of a text file's lines: still valid YAML, but missing keys."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) // 2]))


def retype_d_model(model_dir: Path) -> None:
    config = json.loads((model_dir / "model.json").read_text())
    (model_dir / "model.json").write_text(json.dumps({**config, "d_model": "32"}))


def add_decode_key(model_dir: Path) -> None:
    path = model_dir / "config.yaml"
    path.write_text(path.read_text().replace("decode:\n", "decode:\n  bogus: 3\n", 1))


def add_cut_checkpoint(model_dir: Path) -> None:
    folder = model_dir / "checkpoints"
    folder.mkdir()
    shutil.copy(model_dir / "model.safetensors", folder / "step_00000010.safetensors")
    cut_in_half(folder / "step_00000010.safetensors")
    (folder / "step_00000010.state.pt").write_bytes(b"")


@pytest.fixture(scope="module")
def files(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """Every {placeholder} of the table: damaged model directories, bad configs, small text files."""
    root = tmp_path_factory.mktemp("bad_input")

    def write(name: str, data: bytes | str) -> Path:
        path = root / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def metrics_dir(name: str, lines: str) -> Path:
        (root / name).mkdir()
        write(f"{name}/metrics.jsonl", lines)
        return root / name

    record = '{"kind": "train", "step": %d, "loss": 2.0}\n'
    (root / "empty_dir").mkdir()
    (root / "not_model").mkdir()
    write("not_model/notes.txt", "not a model\n")
    return {
        "config": REPO / "configs" / "reference.yaml",
        "model": tiny_model_dir,
        "missing": root / "no_such_model",
        "not_model": root / "not_model",
        "wrong_types": damaged_copy(tiny_model_dir, root / "wrong_types", retype_d_model),
        "cut_weights": damaged_copy(
            tiny_model_dir, root / "cut_weights", lambda d: cut_in_half(d / "model.safetensors")
        ),
        "bad_decode": damaged_copy(tiny_model_dir, root / "bad_decode", add_decode_key),
        "cut_checkpoint": damaged_copy(tiny_model_dir, root / "cut_checkpoint", add_cut_checkpoint),
        "cut_run": damaged_copy(tiny_model_dir, root / "cut_run", lambda d: cut_at_a_line_end(d / "config.yaml")),
        "old_run": metrics_dir("old_run", record % 1),
        "torn_metrics": metrics_dir("torn_metrics", record % 1 + '{"kind": "tr\n' + record % 2),
        "valid_only_metrics": metrics_dir("valid_only_metrics", '{"kind": "valid", "step": 1, "loss": 2.0}\n'),
        "empty_dir": root / "empty_dir",
        "no_file": root / "no_such_file",
        "a_file": write("a_file", "x\n"),
        "src": write("src.de", "Ein Mann.\nZwei Hunde.\n"),
        "ref": write("ref.en", "A man.\nTwo dogs.\n"),
        "one_line": write("one_line.en", "A man.\n"),
        "empty": write("empty.txt", ""),
        "latin1": write("latin1.txt", "Ein Mann.\nEin Bär.\n".encode("latin-1")),
        "config_latin1": write("latin1.yaml", "train:\n  seed: 1  # Bär\n".encode("latin-1")),
        "config_bad_yaml": write("bad.yaml", "train:\n  seed: 1\n bad: [\n"),
        "binary": write("binary.bin", b"Ein Mann.\n\x00\x9f\xff\xfe binary \x00\n"),
        "docm": write("macros.docm", b"PK\x03\x04 a macro-enabled Word file\n"),
        "pdf": write("paper.pdf", b"%PDF-1.7\n\xe2\xe3\xcf\xd3\n"),
        "huge_line": write("huge.txt", "x" * 10_000_000 + "\n"),
        "bad_tsv": write("bad.tsv", "Mann\tman\nnur eine Spalte\n"),
        "good_tsv": write("good.tsv", "Mann\tman\n"),
    }


def run_main(argv: list[str]) -> int:
    """main's exit status, argparse's SystemExit included."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize(("argv", "status", "message"), CASES)
def test_bad_input_is_one_line_naming_it(argv, status, message, files, tmp_path, monkeypatch, capsys):
    # No downloads: a named test set is looked for in an empty mirror. A serve case that wrongly
    # loads the model returns at once instead of listening forever.
    (tmp_path / "mirror").mkdir()
    monkeypatch.setenv("NMT_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "data_home"))
    monkeypatch.setattr("nmt.server.running.run_app", lambda *args, **kwargs: None)
    paths = {name: str(path) for name, path in {**files, "new_dir": tmp_path / "never_created"}.items()}
    args = [word.format(**paths) for word in shlex.split(argv)]

    assert run_main(args) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line and not LOG_LINE.match(line)]
    assert len(lines) == 1, err
    prog = f"nmt {args[0]}" if args and args[0] in COMMANDS else "nmt"  # argparse's own errors: "nmt"
    prefix = re.escape(prog) + ": error: "
    assert re.match(prefix + ".*" + message.format(**{k: re.escape(v) for k, v in paths.items()}), lines[0]), err


def test_every_command_has_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    listed = re.findall(r"^ {4}([\w-]+)(?: |$)", capsys.readouterr().out, flags=re.MULTILINE)
    assert sorted(listed) == sorted(COMMANDS)  # the table above knows every command
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0 and f"usage: nmt {command}" in capsys.readouterr().out


def test_set_takes_several_values(files, tmp_path, monkeypatch):
    """`--set a=1 b=2` and a repeated --set reach the training config, every value of them."""
    from nmt.training.trainer import Stopped

    seen = {}

    def fake_train(config, out, **kwargs):
        seen["c"] = config
        return Stopped("reached train.max_steps=7")

    monkeypatch.setattr("nmt.training.run.train", fake_train)
    assert (
        main(
            [
                "train",
                str(files["config"]),
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                "--set",
                "train.max_steps=7",
                "train.seed=2",
                "--set",
                "decode.beam=3",
                "train.tune_decoding=false",  # nothing was trained to tune
            ]
        )
        == 0
    )
    config = seen["c"]
    assert (config.train.max_steps, config.train.seed, config.decode.beam) == (7, 2, 3)


def test_a_closed_stdout_pipe_stops_quietly(files, tmp_path):
    """`nmt translate ... | head -1`: the reader goes away; no traceback, status 141 (128 + SIGPIPE)."""
    source = tmp_path / "many.de"
    source.write_text("Ein Mann.\n" * 2000, encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt",
            "translate",
            "--model",
            str(files["model"]),
            "--input",
            str(source),
            "--beam",
            "1",
            "--chunk",
            "10",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout.readline().endswith(b"\n")
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in err and "Error" not in err, err


# --- training corpora: damaged or missing files, found before anything is written ---------------------
GZIP_DAMAGES = {
    "cut short": (lambda whole: whole[: len(whole) // 2], "the gzip stream is cut short"),
    "random bytes": (lambda whole: whole[:10] + bytes(range(256)) * 8, "corrupt gzip data"),
    "plain text": (lambda whole: gzip.decompress(whole), "not a gzip file, though its name ends in .gz"),
}


def corpus_overrides(train_src: Path, tmp_path: Path, valid_src: Path | None = None) -> list[str]:
    """--set overrides training on `train_src` (and a small aligned target and validation set)."""
    lines = [f"ein satz nummer {i}" for i in range(300)]
    (tmp_path / "train.en").write_text("\n".join(lines) + "\n")
    (tmp_path / "valid.de").write_text("ein satz\n")
    (tmp_path / "valid.en").write_text("a sentence\n")
    return [
        "data.corpus=null",
        f"data.train_src={train_src}",
        f"data.train_tgt={tmp_path / 'train.en'}",
        f"data.valid_src={valid_src or tmp_path / 'valid.de'}",
        f"data.valid_tgt={tmp_path / 'valid.en'}",
        "tokenizer.vocab_size=500",
        "train.max_steps=1",
    ]


@pytest.mark.parametrize("damage", GZIP_DAMAGES)
def test_a_damaged_gzip_corpus_is_one_line_naming_the_file_and_nothing_is_written(damage, tmp_path, capsys):
    cut, reason = GZIP_DAMAGES[damage]
    whole = gzip.compress("".join(f"ein satz nummer {i}\n" for i in range(300)).encode())
    broken = tmp_path / "train.de.gz"
    broken.write_bytes(cut(whole))
    out = tmp_path / "run"
    config = REPO / "configs" / "reference.yaml"
    assert (
        run_main(["train", str(config), "--out", str(out), "--quiet", "--set", *corpus_overrides(broken, tmp_path)])
        == 2
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line and not LOG_LINE.match(line)]
    assert lines == [lines[0]] and lines[0].startswith(f"nmt train: error: {broken}: {reason}"), lines
    assert not out.exists()


def test_a_missing_validation_file_fails_before_any_corpus_is_read(tmp_path, capsys, monkeypatch):
    import nmt.training.datasets as datasets

    read = []
    monkeypatch.setattr(datasets, "count_lines", lambda path: read.append(path) or 0)
    monkeypatch.setattr(datasets, "read_parallel", lambda *a, **k: read.append(a) or iter(()))
    (tmp_path / "train.de").write_text("ein satz\n" * 300)
    missing = tmp_path / "no_such_valid.de"
    overrides = corpus_overrides(tmp_path / "train.de", tmp_path, valid_src=missing)
    out = tmp_path / "run"
    assert run_main(["train", str(REPO / "configs/reference.yaml"), "--out", str(out), "--set", *overrides]) == 2
    assert f"nmt train: error: data.valid_src: {missing} does not exist" in capsys.readouterr().err
    assert read == [] and not out.exists()  # no corpus was counted, read or encoded, nothing written


def test_a_failure_that_is_not_the_input_s_fault_exits_1_not_2(files, monkeypatch, capsys):
    """Status 2 says "fix your input"; a bug or a library's runtime failure must not say that."""

    def broken_load(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr("nmt.translator.Translator.load", broken_load)
    assert run_main(["translate", "--model", str(files["model"]), "--input", str(files["src"])]) == 1
    err = capsys.readouterr().err
    assert "nmt translate: error: KeyError: 'a bug' (run with -v for the traceback)" in err and "Traceback" not in err


def test_an_error_part_way_leaves_no_output_file(files, tmp_path, capsys):
    """Line 3 is not UTF-8: lines 1-2 were translated and written (chunks of one line), but the
    output file only appears when the whole input is done, so there is none."""
    source = tmp_path / "in.de"
    source.write_bytes(b"Ein Mann.\nZwei Hunde.\n\xff kaputt\n")
    out = tmp_path / "out.en"
    argv = ["translate", "--model", str(files["model"]), "--input", str(source), "--output", str(out), "--chunk", "1"]
    assert run_main(argv) == 2
    assert f"{source}:3: not valid UTF-8" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [source]  # no partial file, no temporary left
    out.write_text("an earlier translation\n", encoding="utf-8")
    assert run_main(argv) == 2
    assert out.read_text(encoding="utf-8") == "an earlier translation\n"  # left as it was


@pytest.mark.parametrize(
    "command, test, message",
    [
        ("evaluate", "multi30k:test_2016_flickr:fr-en", "was trained for de-en, not fr-en$"),
        ("tune-length-penalty", "multi30k:val:cs-en", "was trained for de-en, not cs-en$"),
        ("tune-precision", "multi30k:val:en-de", r"writes en \(de-en\), not de$"),
    ],
)
def test_a_test_set_in_a_language_the_model_never_read_is_refused(tiny_model_dir, command, test, message, capsys):
    """Its scores would mean nothing, and the tune commands would write settings chosen on them."""
    assert run_main([command, "--model", str(tiny_model_dir), "--test", test]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line and not LOG_LINE.match(line)]
    assert len(lines) == 1 and re.search(f"error: {re.escape(str(tiny_model_dir))} {message}", lines[0]), lines


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_mirror_that_is_not_a_directory_is_a_setting_to_mend_exit_2(kind, tmp_path, monkeypatch, capsys):
    mirror = tmp_path / "mirror"
    if kind == "file":
        mirror.write_text("not a folder\n", encoding="utf-8")
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "data_home"))
    assert run_main(["data", "get", "multi30k", "fr-en"]) == 2
    assert f"mirror {mirror} (the mirror argument or NMT_MIRROR) is not a directory" in capsys.readouterr().err
