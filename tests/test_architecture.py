"""The folder layout is the architecture: imports point one way (see README, Layout)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "nmt"

# package (or module) -> the nmt packages/modules it may import
ALLOWED = {
    "model": {"model"},
    "decoding": {"model", "decoding"},
    "data": {"data", "files", "tokenizer"},
    "tokenizer": {"files"},
    "files": set(),
    "config_checks": set(),
    "config": {"config_checks", "files", "model", "tokenizer"},
    "model_dir": {"config", "tokenizer"},
    "checkpoint": {"model", "files", "model_dir"},
    "evaluation": set(),
    # Inference engines know the model, the searches and the files of a model directory, never the
    # Translator, the CLI or the server that use them.
    "packed_linear": set(),
    "int8_linear": set(),
    "precision": {"int8_linear", "packed_linear"},
    "engine": {"config", "decode_processes", "decoding", "model", "precision"},
    # Worker processes run the engine in a child interpreter (imported there, not at load).
    "decode_processes": {"config", "engine", "model"},
    "export_ctranslate2": {"checkpoint", "model", "model_dir", "tokenizer"},
    "engine_ctranslate2": {"config", "decoding", "engine", "export_ctranslate2", "tokenizer"},
    "translator": {
        "checkpoint",
        "config",
        "decoding",
        "engine",
        "engine_ctranslate2",
        "export_ctranslate2",
        "model",
        "model_dir",
        "tokenizer",
    },
    "translation_io": {"translator"},
    # Choosing a decoding setting on held-out data: translate and score, then write the model's config.
    "tuning": {"config", "evaluation", "model_dir", "translator"},
    "plots": {"model", "model_dir", "tokenizer", "translator"},
    # Training uses the library; only the CLI uses training.
    "training": {
        "checkpoint",
        "config",
        "data",
        "evaluation",
        "files",
        "model",
        "model_dir",
        "tokenizer",
        "translator",
    },
    # Serving (the HTTP app, its request checks, batching queue, access rules, metrics, web page) is one
    # package over the Translator; nothing imports it but the CLI.
    "server": {"model_dir", "tokenizer", "translator"},
    # The shells: nothing imports them (but `python -m nmt`).
    "cli": {
        "checkpoint",
        "config",
        "data",
        "evaluation",
        "export_ctranslate2",
        "model_dir",
        "plots",
        "server",
        "training",
        "translation_io",
        "translator",
        "tuning",
    },
    "__main__": {"cli"},
    "__init__": {"translator", "config", "training"},
}


def nmt_imports(path: Path) -> set[str]:
    """Top-level nmt subpackages that a file imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                names = [".".join(["nmt", *base, *(node.module.split(".") if node.module else [])])]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "nmt" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_point_one_way():
    checked = 0
    for path in SRC.rglob("*.py"):
        top = path.relative_to(SRC).parts[0].removesuffix(".py")
        if top not in ALLOWED:
            continue
        bad = nmt_imports(path) - ALLOWED[top] - {top}
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}; {top} may import only {sorted(ALLOWED[top])}"
        checked += 1
    assert checked >= 7  # the model package alone has seven modules


def test_every_module_has_an_import_rule():
    tops = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")}
    assert tops - set(ALLOWED) == set(), "add the new module to ALLOWED, with what it may import"
