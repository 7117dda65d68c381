"""Resource files (.json, .arb, .yml, .yaml): every string value translated, keys and structure kept.

    {"menu": {"open": "Open {{count}} files", "size": 3}}  ->  {"menu": {"open": "{{count}} Dateien öffnen", "size": 3}}

A program's strings are the values of a tree of keys: i18next and Flutter's ARB write it in JSON,
Rails in YAML. Each string value is a software string whose placeholders are kept exactly
(nmt.placeholders: {{count}}, %{name}, $t(key), <b>...); keys, numbers, booleans and the tree's
order stay as they were.

- JSON is written back with the file's own indentation. In an ARB file the keys that start with
  "@" are metadata (descriptions, placeholders' types), not text; "@@locale" becomes the target.
- YAML is read and written by ruamel.yaml's round trip: comments, key order, quoting and block
  styles are kept; a Rails file's one root key naming the source language is renamed to the target.
  A string that anchors and aliases repeat is translated once; a tree of aliases cannot make the
  walk exponential ("billion laughs"), and YAML tags make no objects. A file that the round trip
  would write back as YAML it cannot read (an explicit "? key" with a comment after it) is refused
  when it is read, before anything is translated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from io import StringIO
from typing import Any

from ..placeholders import MaskedText
from .errors import DocumentError
from .text_files import Results, check_results, decoded

MAX_STRINGS = 1_000_000  # a resource file of more strings than this is no program's


def string_slots(root: Any, *, skip_key=lambda key: False) -> Iterator[tuple[Any, Any]]:
    """(container, key or index) of each string value in a tree of dicts and lists, in order, each
    container visited once (an alias repeats a container, not its strings); `skip_key`: keys whose
    values are no text."""
    seen: set[int] = set()
    stack = [root]
    found = 0
    while stack:  # a stack, not recursion: a deeply nested file is no RecursionError
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):  # a YAML mapping's own keys: those a merge (<<: *defaults) brings stay there
            items = list(node.non_merged_items()) if hasattr(node, "non_merged_items") else list(node.items())
        else:
            items = list(enumerate(node))
        later = []
        for key, value in items:
            if isinstance(node, dict) and skip_key(key):
                continue
            if isinstance(value, str):
                found += 1
                if found > MAX_STRINGS:
                    raise ValueError(f"more than {MAX_STRINGS:,} strings")
                yield node, key
            elif isinstance(value, (dict, list)):
                later.append(value)
        stack += reversed(later)


class StringTree:
    """The string values of a parsed tree, read for translation: `sentences`, then `fill(results)`.

    A YAML string with an anchor is one string however many aliases name it: translated once, and
    written back with its anchor, the aliases still naming it."""

    def __init__(self, root: Any, lang: str, *, skip_key=lambda key: False):
        self.slots = list(string_slots(root, skip_key=skip_key))
        self.texts: dict[int, MaskedText] = {}  # id of each distinct string -> the string read
        for container, key in self.slots:  # one string object in several places is read once
            value = container[key]
            if id(value) not in self.texts:
                self.texts[id(value)] = MaskedText(value, lang)
        self.sentences = [s for text in self.texts.values() for s in text.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for text in self.texts.values() for w in text.sentences_as_written]

    def fill(self, results: Results) -> None:
        """Each string replaced by its translation, keeping its type (a YAML string keeps its quoting)."""
        check_results(results, self.sentences)
        answers = iter(results)
        new = {}  # id of each distinct string -> its translation
        for key, text in self.texts.items():
            new[key] = text.rebuilt([next(answers) for _ in text.sentences])
        written: dict[int, str] = {}  # an anchored string's translation, made once for every alias
        for container, key in self.slots:
            old = container[key]
            if id(old) not in written:
                written[id(old)] = new[id(old)] if type(old) is str else type(old)(new[id(old)])
                if anchor := _anchor(old):
                    written[id(old)].yaml_set_anchor(anchor, always_dump=True)
            container[key] = written[id(old)]


def _anchor(value: str) -> str | None:
    """The anchor of a YAML string (ruamel's round trip keeps it on the string), else None."""
    anchor = getattr(value, "anchor", None)
    return getattr(anchor, "value", None)


class JsonResources:
    """A .json or .arb file of strings read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None):
        text = decoded(content, name)
        try:
            self.root = json.loads(text)
        except json.JSONDecodeError as err:
            raise DocumentError(f"{name}:{err.lineno}: not JSON ({err.msg}, column {err.colno})") from None
        except RecursionError:
            raise DocumentError(f"{name}: nested too deeply to be a resource file") from None
        if not isinstance(self.root, (dict, list)):
            raise DocumentError(f"{name}: a resource file is a JSON object of strings, not a lone value")
        arb = name.lower().endswith(".arb")
        if arb and target and isinstance(self.root, dict) and "@@locale" in self.root:
            self.root["@@locale"] = target.replace("-", "_")
        try:
            self.strings = StringTree(self.root, lang, skip_key=lambda key: arb and str(key).startswith("@"))
        except ValueError as err:
            raise DocumentError(f"{name}: {err}", too_large=True) from None
        self.sentences = self.strings.sentences
        indent = re.search(r"^[{\[]\s*\n([ \t]+)\S", text)
        self.indent = indent.group(1) if indent else None
        self.newline = text.endswith("\n")

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return self.strings.sentences_as_written

    def rebuilt(self, results: Results) -> bytes:
        self.strings.fill(results)
        out = json.dumps(self.root, ensure_ascii=False, indent=self.indent)
        return (out + ("\n" if self.newline else "")).encode("utf-8")


def yaml_indents(text: str) -> tuple[int, int]:
    """(mapping indent, a sequence's dash offset under its key) as the file writes them."""
    mapping, offset = 2, 0
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for before, line in zip(lines, lines[1:], strict=False):
        deeper = len(line) - len(line.lstrip()) - (len(before) - len(before.lstrip()))
        if line.lstrip().startswith("- ") and before.rstrip().endswith(":"):
            offset = max(deeper, 0)
            break
    for before, line in zip(lines, lines[1:], strict=False):
        deeper = len(line) - len(line.lstrip()) - (len(before) - len(before.lstrip()))
        if deeper > 0 and before.rstrip().endswith(":") and not line.lstrip().startswith("-"):
            mapping = deeper
            break
    return mapping, offset


class YamlResources:
    """A .yml or .yaml file of strings read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None):
        from ruamel.yaml import YAML  # noqa: PLC0415 (loaded only for a YAML file)
        from ruamel.yaml.error import YAMLError  # noqa: PLC0415

        text = decoded(content, name)
        self.yaml = YAML(typ="rt")  # the round trip: comments, order and styles kept; tags make no objects
        self.yaml.preserve_quotes = True
        self.yaml.width = 4096  # long strings stay on their line
        mapping, offset = yaml_indents(text)
        self.yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
        try:
            self.root = self.yaml.load(text)
        except YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise DocumentError(f"{name}{where}: not YAML ({problem})") from None
        except RecursionError:
            raise DocumentError(f"{name}: nested too deeply to be a resource file") from None
        except NotImplementedError as err:  # ruamel.yaml's round trip, on some bad YAML: "overlap in comment [...]"
            raise DocumentError(f"{name}: not YAML (ruamel.yaml: {str(err).partition(' [')[0]})") from None
        except TypeError as err:  # a mapping as a key of a mapping ("? : :"): the round trip cannot hash it
            raise DocumentError(f"{name}: a YAML key nmt cannot read ({err})") from None
        if not isinstance(self.root, (dict, list)):
            raise DocumentError(f"{name}: a resource file is a YAML mapping of strings, not a lone value")
        if target and isinstance(self.root, dict) and list(self.root) == [lang] and lang != target:
            self.root.insert(0, target, self.root.pop(lang))  # Rails: the root key is the locale
        try:
            self.strings = StringTree(self.root, lang)
        except ValueError as err:
            raise DocumentError(f"{name}: {err}", too_large=True) from None
        self.name = name
        self.written()  # refused now, before any translation, where the file cannot be written back
        self.sentences = self.strings.sentences

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return self.strings.sentences_as_written

    def rebuilt(self, results: Results) -> bytes:
        self.strings.fill(results)
        return self.written().encode("utf-8")

    def written(self) -> str:
        """The tree as ruamel.yaml's round trip writes it; a DocumentError where that is no YAML it
        reads back as written. Its emitter writes some odd but valid files wrongly: a key with a
        comment after it ("? key  # note") loses its "?", a flow mapping broken over a blank line
        gains a ":", and some it cannot write at all (an IndexError)."""
        from ruamel.yaml import YAML  # noqa: PLC0415

        out = StringIO()
        try:
            self.yaml.dump(self.root, out)
            YAML(typ="rt").load(out.getvalue())
        except Exception as err:  # noqa: BLE001 - whatever ruamel.yaml raises, writing or reading back
            problem = " ".join(str(getattr(err, "problem", None) or err).split())[:100]
            raise DocumentError(
                f"{self.name}: YAML that ruamel.yaml cannot write back as it reads it ({type(err).__name__}: {problem})"
            ) from None
        return out.getvalue()
