"""What a model translates: the languages it reads and writes, and the pairs it was trained for.

One value, asked by everything that decides whether a model can take a request: the Translator
before it searches, the CLI before a model loads (`nmt evaluate --test`), and the server when it
routes a pair to a model and checks a request's languages before the queue.

    directions = Directions(pairs=(("de", "en"), ("fr", "en")))       # a many-to-one model of nmt's
    directions = Directions(targets=("de", "fr"), source="en")        # a multi-target (>>xx<<) model
    directions.check_pair("cs", "en")   # ConfigError: not a direction this model was trained for
    directions.target_of(">>fr<< A dog.")                             # "fr"

A model says what it knows: the pairs its multilingual config trained (none for an imported
model), the `>>xx<<` target tokens of its tokenizer, the language its config or origin names as
its source, and the one language a single-target model writes. Where it says nothing, nothing is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config_checks import ConfigError
from .sentencepiece_tokenizer import LANGUAGE_CODE


def target_lang_error(problem: str) -> ConfigError:
    """A ConfigError on the target language, which the CLI words as its option (--target-lang)."""
    return ConfigError(f"target_lang {problem}", key="target_lang", problem=problem)


@dataclass(frozen=True)
class Directions:
    """The languages a model reads and writes (see the module's docstring)."""

    pairs: tuple[tuple[str, str], ...] = ()  # the (source, target) pairs it was trained for, where known
    targets: tuple[str, ...] = ()  # a multi-target model's languages, one >>xx<< token each
    source: str | None = None  # the language its config or origin says it reads
    output: str | None = None  # the one language a single-target model writes

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(tuple(p) for p in self.pairs))
        object.__setattr__(self, "targets", tuple(self.targets))

    @property
    def sources(self) -> list[str]:
        """The languages the model was trained to read, where known (else empty: any is taken). A
        three-letter source code may name a group (OPUS-MT's "mul", "roa"): it checks nothing."""
        trained = self.source if self.source and len(self.source) == 2 else None
        return sorted({s for s, _ in self.pairs} or ({trained} if trained else set()))

    def trained_as(self) -> str:
        """What the model translates, for messages: its pairs ("de-en, fr-en") or "from de"."""
        if self.pairs:
            return ", ".join(f"{s}-{t}" for s, t in self.pairs)
        return f"from {', '.join(self.sources)}"

    def check_source(self, language: str) -> None:
        """ConfigError (key source_lang) unless the model reads `language` (or its sources are unknown)."""
        if self.sources and language not in self.sources:
            problem = f"{language!r} was not trained: this model translates {self.trained_as()}"
            raise ConfigError(f"source_lang {problem}", key="source_lang", problem=problem)

    def check_pair(self, source: str | None, target: str | None) -> None:
        """ConfigError unless source -> target is a trained pair (where both, and the pairs, are known)."""
        target = target or self.output
        if not self.pairs or source is None or target is None or (source, target) in self.pairs:
            return
        raise ConfigError(f"{source}-{target} is not a direction this model was trained for ({self.trained_as()})")

    def check_target(self, language: str | None) -> None:
        """ConfigError (key target_lang) unless `language` is one this model takes (None: one it needs not)."""
        if language is None and self.targets:
            raise target_lang_error(
                f"is needed: this model translates into several languages ({', '.join(self.targets)})"
            )
        if language is not None and language not in self.targets:
            if not self.targets:
                if language == self.output:
                    return  # the one language it writes: a client may name it (many-to-one models)
                into = f"only into {self.output}" if self.output else "into one language"
                raise target_lang_error(f"{language!r} cannot be chosen: this model translates {into}")
            raise target_lang_error(f"must be one of {', '.join(self.targets)}, got {language!r}")

    def target_of(self, text: str, asked: str | None = None, source: str | None = None) -> str | None:
        """The language a multi-target model writes `text` in: its own >>xx<< token (as OPUS-MT's
        users write them), else `asked`; None on a model with one target. A ConfigError for none,
        one the model lacks, a token contradicting the one asked for, or a pairing with `source` it
        was not trained for."""
        if not self.targets:
            return None
        written = LANGUAGE_CODE.match(text.lstrip())
        if written is not None:
            if asked is not None and written.group(1) != asked:
                raise target_lang_error(f"is {asked!r}, but the text asks for >>{written.group(1)}<<: {text[:40]!r}")
            asked = written.group(1)
        self.check_into(asked, source)  # None raises, naming the languages
        return asked

    def check_into(self, target: str | None, source: str | None) -> None:
        """ConfigError unless the model writes `target` (check_target), from `source` (check_pair)."""
        self.check_target(target)
        self.check_pair(source, target)

    def routes(self) -> list[tuple[tuple[str, str], str | None]]:
        """The pairs a server can send to this model, each with the target to ask it for (a
        multi-target model's >>xx<< language, else None); pairs with an unknown side are left out."""
        if len(self.pairs) > 1:  # trained pairs, each asked for by its target
            found = [((src, tgt), tgt if self.targets else None) for src, tgt in self.pairs]
        else:
            targets = [(t, t) for t in self.targets] if self.targets else [(self.output, None)]
            found = [((self.source, target), asked) for target, asked in targets]
        return [(pair, asked) for pair, asked in found if all(pair)]

    def check_test_set(self, source: str, target: str, *, zero_shot: bool | None = None) -> None:
        """ConfigError for a test set in a direction a model of nmt's own was not trained for, naming
        those it was: its scores would be those of a language it never read. zero_shot: a
        multilingual model may try an untrained pair into a language it writes (None: no such option)."""
        if not self.pairs:  # an imported model: nothing to go by
            return
        names = ", ".join(f"{s}-{t}" for s, t in self.pairs)
        writes = {t for _, t in self.pairs}
        if target not in writes:  # zero-shot or not: it would score another language
            raise ConfigError(f"writes {', '.join(sorted(writes))} ({names}), not {target}")
        if (source, target) not in self.pairs and not zero_shot:
            anyway = " (--zero-shot to try it anyway)" if zero_shot is not None and len(self.pairs) > 1 else ""
            raise ConfigError(f"was trained for {names}, not {source}-{target}{anyway}")
