"""The names and defaults a user chooses among at inference, owned here so that the CLI can show
them in `--help` without importing torch (the modules that act on them import them from here)."""

# nmt's own engine; CTranslate2 on the same weights; auto: the faster one that can run the model
# (nmt.inference.engine_choice), the command line's default
ENGINES = ("auto", "torch", "ctranslate2")
COMMAND_LINE_ENGINE = "auto"  # translate, evaluate, serve; the Python API's default is "torch" (EngineOptions)
PRECISIONS = ("fp32", "int8", "bf16")  # what a model computes in (see nmt.inference.precision)
QUANTIZATIONS = ("float32", "int8", "int16")  # how `nmt export --to ctranslate2` stores the weights
LENGTH_PENALTIES = (0.6, 1.0, 1.5, 2.0, 2.5, 3.0)  # the GNMT alphas `nmt tune-length-penalty` tries
# a lexical shortlist (nmt.inference.shortlist): candidates kept per source piece, and the most
# frequent target pieces every sentence gets (changing either measured within noise on Multi30k)
SHORTLIST_PER_SOURCE, SHORTLIST_FREQUENT = 20, 100
# `nmt tune-precision` (and `nmt distill` for its student) makes int8 a model's default on CPU where
# it is faster here and scores at most this much cased BLEU below fp32 on the validation set: the
# students measured -0.20 and +0.07 on test, inside run-to-run noise (docs/results.md)
INT8_TOLERANCE = 0.3
CHUNK_LINES = 1000  # lines `nmt translate` reads, sorts by length and translates together
