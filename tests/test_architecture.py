"""The folder layout is the architecture: imports point one way (see README, Layout)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "nmt"

# package (or module) -> the nmt packages/modules it may import
ALLOWED = {
    "model": {"model"},
    "decoding": {"model", "decoding"},
    # A corpus's transcript annotations are found with text_form's pattern of them (data/annotations.py).
    "data": {"data", "files", "text_form", "tokenizer"},
    "tokenizer": {"config_checks", "files", "sentencepiece_tokenizer"},
    "sentencepiece_tokenizer": {"files"},
    "files": set(),
    "config_checks": set(),
    # The search options, declared once for a model's decode section and each call's request.
    "search_settings": {"config_checks"},
    # What a model reads and writes: asked by the Translator, the CLI and the server alike.
    "directions": {"config_checks", "sentencepiece_tokenizer"},
    "config": {"config_checks", "files", "model", "search_settings", "tokenizer"},
    "model_dir": {"config", "files", "text_form", "tokenizer", "truecaser"},
    # Real text around the model: pure functions of text (and, for alignments, attention tensors).
    "text_form": {"glossary", "truecaser"},
    # A translation, and what is added to it after the search (scores, word alignment, the words that
    # label its attention, running text).
    "translation": {"alignment", "decoding", "forced_scoring", "quality", "text_form", "tokenizer"},
    # What a model's quality scores mean: a calibration kept in its directory.
    "quality": {"files"},
    "quality_report": {"files", "quality"},
    "truecaser": {"files"},
    "documents": set(),
    "markup": {"documents"},
    "placeholders": {"documents", "markup"},
    # A translation memory: segments looked up by their text (placeholders read as one mark).
    "memory": {"memory_files", "placeholders"},
    "memory_files": {"formats"},
    # Document files: their text read and written back through documents and markup.
    "formats": {"documents", "formats", "markup", "placeholders"},
    "glossary": set(),
    "alignment": set(),
    "checkpoint": {"model", "files", "model_dir"},
    "evaluation": set(),
    # Inference knows the model, the searches and the files of a model directory, never the
    # Translator, the CLI or the server that use it (its own modules' rules: INFERENCE below); the
    # CTranslate2 export returns the attention that alignment's method reads.
    "inference": {
        "alignment",
        "checkpoint",
        "config",
        "config_checks",
        "decoding",
        "files",
        "inference",
        "model",
        "model_dir",
        "search_settings",
        "tokenizer",
    },
    # Beside the Translator: its teacher-forced passes and a glossary's constrained search.
    "forced_scoring": {"alignment", "decoding", "inference", "tokenizer"},
    "term_search": {"decoding", "forced_scoring", "inference", "search_settings", "text_form", "tokenizer"},
    "translator": {
        "alignment",
        "config",
        "config_checks",
        "decoding",
        "directions",
        "forced_scoring",
        "glossary",
        "inference",
        "model",
        "model_dir",
        "quality",
        "rare_numbers",
        "search_settings",
        "term_search",
        "text_form",
        "tokenizer",
        "translation",
    },
    "short_segments": set(),
    # Rare numbers swapped for ones the model knows while it translates: pure functions of text.
    "rare_numbers": set(),
    "translation_io": {
        "alignment",
        "documents",
        "glossary",
        "inference",
        "memory",
        "placeholders",
        "quality",
        "search_settings",
        "short_segments",
        "translator",
    },
    # Choosing a decoding setting on held-out data: translate and score, then write the model's config.
    "tuning": {"config", "evaluation", "inference", "model_dir", "quality", "search_settings", "translator"},
    "plots": {"alignment", "model", "model_dir", "search_settings", "tokenizer", "translator"},
    # Models of other toolkits, read into (and written from) nmt's model and tokenizers.
    "pretrained": {
        "checkpoint",
        "files",
        "model",
        "model_dir",
        "search_settings",
        "sentencepiece_tokenizer",
        "tokenizer",
    },
    # Training uses the library; only the CLI uses training (a TMX file is training data too).
    "training": {
        "checkpoint",
        "config",
        "data",
        "evaluation",
        "files",
        "memory_files",
        "model",
        "model_dir",
        "text_form",
        "tokenizer",
        "translator",
    },
    # Serving (the HTTP app, its request checks, batching queue, access rules, metrics, web page) is one
    # package over the Translator; nothing imports it but the CLI.
    "server": {
        "alignment",
        "config_checks",
        "directions",
        "documents",
        "formats",
        "glossary",
        "inference",
        "markup",
        "memory",
        "model_dir",
        "placeholders",
        "quality",
        "search_settings",
        "tokenizer",
        "translation_io",
        "translator",
    },
    # The shells: nothing imports them (but `python -m nmt`).
    "cli": {
        "alignment",
        "checkpoint",
        "config",
        "memory",
        "config_checks",
        "data",
        "directions",
        "evaluation",
        "files",
        "formats",
        "glossary",
        "inference",
        "markup",
        "model_dir",
        "plots",
        "pretrained",
        "quality",
        "quality_report",
        "search_settings",
        "server",
        "training",
        "translation_io",
        "translator",
        "truecaser",
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


# Within inference: each module's place (see nmt/inference/__init__.py). What a call asks for (plan,
# choices) imports no engine; one batch's search knows no workers; the worker processes import the
# batch search, never an engine; only loading knows both engines.
INFERENCE = {
    "choices": set(),
    "plan": {"choices"},
    "contract": {"choices"},
    "int8_linear": set(),
    "packed_linear": set(),
    "precision": {"choices", "int8_linear", "packed_linear"},
    "batch_search": {"precision"},
    "workers": {"batch_search", "plan", "precision"},
    "shortlist": {"choices"},
    "mc_dropout": set(),
    "torch_engine": {"batch_search", "contract", "mc_dropout", "plan", "precision", "shortlist", "workers"},
    "export_ctranslate2": {"choices", "shortlist"},
    "ctranslate2_engine": {"batch_search", "contract", "export_ctranslate2", "plan", "shortlist"},
    "engine_choice": {"export_ctranslate2", "shortlist"},
    "loading": {
        "contract",
        "ctranslate2_engine",
        "engine_choice",
        "export_ctranslate2",
        "plan",
        "precision",
        "shortlist",
        "torch_engine",
    },
    "__init__": set(),
}


def module_imports(path: Path) -> set[str]:
    """Dotted nmt modules (files) that a file imports, relative imports resolved; `from pkg import mod`
    counts the module."""
    modules = {module_name(p) for p in SRC.rglob("*.py")}
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module_name(path):
                found.add(name)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """nmt module -> the nmt modules it imports (the package `nmt` itself left out: it loads lazily)."""
    return {module_name(p): module_imports(p) - {"nmt"} for p in SRC.rglob("*.py")}


def check_places(package: str, rules: dict[str, set[str]]) -> None:
    """Each module of `package` imports only the modules of the package that `rules` allow it."""
    checked = 0
    for path in (SRC / package).glob("*.py"):
        prefix = f"nmt.{package}."
        inside = {m.removeprefix(prefix) for m in module_imports(path) if m.startswith(prefix)}
        assert inside <= rules[path.stem], f"{package}/{path.name} imports {sorted(inside - rules[path.stem])}"
        checked += 1
    assert checked == len(rules), f"add the new {package} module to its rules"


def test_inference_modules_keep_their_places():
    check_places("inference", INFERENCE)


# Within server/: the pure parts below the service, the service below the two API routers, the app
# above them, and running it above all (nothing below imports an API or the app).
SERVER = {
    "__init__": set(),
    "settings": set(),
    "access": set(),
    "keys": set(),
    "shared_state": {"keys"},
    "requests": {"settings"},
    "batching_queue": {"settings"},
    "connections": {"settings"},
    "metrics": {"batching_queue"},
    "libretranslate": {"requests"},
    "service": {"batching_queue", "keys", "metrics", "requests", "settings", "shared_state"},
    # The OpenAPI description of both APIs, which the routers declare on their routes.
    "api_schema": {"libretranslate", "requests", "settings"},
    "libretranslate_api": {"api_schema", "batching_queue", "libretranslate", "requests", "service", "shared_state"},
    "nmt_api": {"api_schema", "batching_queue", "requests", "service"},  # the two API routers are peers
    "app": {
        "access",
        "api_schema",
        "batching_queue",
        "connections",
        "keys",
        "libretranslate",
        "libretranslate_api",
        "metrics",
        "nmt_api",
        "requests",
        "service",
        "shared_state",
    },
    "running": {"access", "app", "batching_queue", "connections", "keys", "service", "settings", "shared_state"},
}


def test_server_modules_keep_their_places():
    check_places("server", SERVER)


def test_the_readme_layout_names_every_package_and_module():
    readme = (SRC.parents[1] / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout") : readme.index("## Dependencies")]
    names = [
        f"{p.name}/" if p.is_dir() else p.name
        for p in SRC.iterdir()
        if not p.name.startswith("_") and ((p / "__init__.py").is_file() or p.suffix == ".py")
    ]
    assert len(names) > 20 and [n for n in names if n not in layout] == []


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(module) :] + [module]))
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])
    assert sum(map(len, graph.values())) > 100  # the graph was read, not empty


def test_every_module_has_an_import_rule():
    tops = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")}
    assert tops - set(ALLOWED) == set(), "add the new module to ALLOWED, with what it may import"
