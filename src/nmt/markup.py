"""HTML: the text of a page translated in context, its markup kept.

Each block (an element such as <p>, <li> or <td> holding text) is translated as one paragraph of
running text, inline tags and all: "Click <a href="/x">this <b>red</b> button</a> now." is read
as "Click this red button now.", so the model sees the whole sentence. The translated words are
then put back into the block's text nodes in order, every tag where it was: each output word goes
to the text node that the source word it is aligned to came from (word alignments from the model's
cross-attention, nmt.alignment), under the constraint that the nodes keep their order, which a
dynamic program over the output words solves exactly (fewest words placed away from their source).

So the page's tag tree, attributes included, is the input's; only text changes. Scripts, styles,
code, preformatted text and anything marked translate="no" or class="notranslate" are left as
they are. The parser is the standard library's, through Beautiful Soup, which reads broken markup
as browsers do rather than failing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import PreformattedString

from .documents import Paragraph

# Elements whose content is no text to translate.
UNTOUCHED = {"script", "style", "code", "pre", "kbd", "samp", "var", "textarea", "template", "svg", "math", "noscript"}
# Elements that sit inside a sentence: their text is translated with the words around them.
INLINE = {
    "a", "abbr", "b", "bdi", "bdo", "cite", "data", "del", "dfn", "em", "font", "i", "ins", "label", "mark", "q",
    "s", "small", "span", "strong", "sub", "sup", "time", "u",
}  # fmt: skip
_WORD = re.compile(r"\S+")
_SPECIAL_STRINGS = PreformattedString  # comments, CDATA, doctypes, declarations: no text a reader sees


def untouched(tag: Tag) -> bool:
    """Whether `tag` and everything in it is left as it is."""
    if tag.name in UNTOUCHED or str(tag.get("translate", "")).strip().lower() == "no":  # HTML: any case
        return True
    classes = tag.get("class") or []
    return "notranslate" in classes


@dataclass
class Block:
    """The text nodes of one block, in order; together they read as one paragraph."""

    nodes: list[NavigableString]

    @property
    def text(self) -> str:
        return "".join(self.nodes)


def blocks_of(soup: BeautifulSoup) -> list[Block]:
    """Every block of text in the page: the text nodes reached from an element through inline
    elements only (a nested block is a block of its own)."""
    blocks: list[Block] = []

    def visit(element: Tag) -> None:
        current: list[NavigableString] = []

        def collect(node) -> None:
            for child in node.children:
                if isinstance(child, NavigableString):
                    if not isinstance(child, _SPECIAL_STRINGS):
                        current.append(child)
                elif isinstance(child, Tag) and not untouched(child):
                    if child.name in INLINE:
                        collect(child)
                    else:
                        close()
                        visit(child)

        def close() -> None:
            if current and "".join(current).strip():
                blocks.append(Block(list(current)))
            current.clear()

        collect(element)
        close()

    visit(soup)
    return blocks


def place_words(costs: Sequence[Sequence[float]]) -> list[int]:
    """The node of each output word, nodes in order (never decreasing), at the least total cost.

    costs[j][i]: the cost of output word j in node i (inf: never there). Among equal costs a word
    goes to the latest node it can, so a word without a link of its own stays with the word after it.
    O(words x nodes)."""
    words, nodes = len(costs), len(costs[0]) if costs else 0
    if not words:
        return []
    best = [list(costs[0])]  # best[j][i]: least cost of words 0..j with word j in node i
    for j in range(1, words):
        row, running = [], float("inf")
        for i in range(nodes):
            running = min(running, best[j - 1][i])
            row.append(running + costs[j][i])
        best.append(row)
    placed = [min(range(nodes), key=lambda i: (best[-1][i], -i))]
    for j in range(words - 2, -1, -1):
        placed.append(min(range(placed[-1] + 1), key=lambda i: (best[j][i], -i)))
    return placed[::-1]


def _node_of_chars(block: Block) -> list[int]:
    """For each character of the block's text, the index of the text node it is in."""
    owner = []
    for i, node in enumerate(block.nodes):
        owner += [i] * len(node)
    return owner


def fill_block(block: Block, words: list[str], placed: list[int]) -> None:
    """Write the output words into the block's nodes (word j into node placed[j]), keeping each
    node's outer whitespace (so the block's own leading and trailing whitespace too); a node left
    with no words keeps only its whitespace."""
    texts: list[list[str]] = [[] for _ in block.nodes]
    for word, node in zip(words, placed, strict=True):
        texts[node].append(word)
    written = ""  # the block's new text so far
    for i, node in enumerate(block.nodes):
        original = str(node)
        if not original.strip():
            new = original  # whitespace between tags: as it was
        else:
            lead = original[: len(original) - len(original.lstrip())]
            trail = original[len(original.rstrip()) :]
            body = " ".join(texts[i])
            if body and written.strip() and not written[-1].isspace() and not lead:
                lead = " "  # two nodes' words would run together: the source had them in one word
            new = lead + body + trail if body else lead or trail
        written += new
        node.replace_with(NavigableString(new))


def page_text(html: str) -> str:
    """The text a reader of the page sees (for language identification)."""
    return " ".join(block.text.strip() for block in blocks_of(BeautifulSoup(html, "html.parser")))


class HtmlPage:
    """A page read for translation: `sentences` to translate, then `rebuilt(results)` once.

    results: for each sentence, (translation, word alignment or None), the alignment as (source
    word, output word) pairs over whitespace-separated words; without one, words are placed in
    proportion to the nodes' own words."""

    def __init__(self, html: str, lang: str):
        self.soup = BeautifulSoup(html, "html.parser")
        self.blocks = blocks_of(self.soup)
        self.paragraphs = [Paragraph.parse(block.text, lang) for block in self.blocks]
        self.sentences = [s for p in self.paragraphs for s in p.sentences]

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> str:
        """The page with each sentence replaced by its translation and the markup as it was."""
        if len(results) != len(self.sentences):
            raise ValueError(f"{len(results)} translations for {len(self.sentences)} sentences")
        answers = iter(results)
        for block, paragraph in zip(self.blocks, self.paragraphs, strict=True):
            owner = _node_of_chars(block)
            text_nodes = [bool(node.strip()) for node in block.nodes]
            words: list[str] = []
            costs: list[list[float]] = []
            at = len(paragraph.gaps[0])
            for sentence, gap in zip(paragraph.sentences, paragraph.gaps[1:], strict=True):
                text, alignment = next(answers)
                source_nodes = [owner[at + m.start()] for m in _WORD.finditer(sentence)]
                out_words = text.split()
                costs += _costs(source_nodes, len(out_words), text_nodes, alignment)
                words += out_words
                at += len(sentence) + len(gap)
            fill_block(block, words, place_words(costs))
        return self.soup.decode(formatter="minimal")


def translate_html(
    html: str,
    translate: Callable[[list[str]], Sequence[tuple[str, list[tuple[int, int]] | None]]],
    *,
    lang: str,
) -> str:
    """The page with its text translated and its markup kept.

    translate: sentences -> (translation, word alignment or None) for each, in order (see HtmlPage);
    lang: the source language (for splitting sentences).
    """
    page = HtmlPage(html, lang)
    return page.rebuilt(translate(page.sentences) if page.sentences else [])


def _costs(
    source_nodes: list[int], out_words: int, text_nodes: list[bool], alignment: list[tuple[int, int]] | None
) -> list[list[float]]:
    """costs[j][i] for one sentence: 0 where output word j is aligned to a source word of node i, 1
    elsewhere, and never a node that holds only whitespace (text_nodes[i] False: it is written back
    as it was); an unaligned word costs the same in any text node. Without an alignment, each output
    word is expected where the same fraction of the source words is."""
    costs = []
    for j in range(out_words):
        if alignment is None:
            guess = source_nodes[min(len(source_nodes) - 1, j * len(source_nodes) // max(out_words, 1))]
            linked = {guess} if source_nodes else set()
        else:
            linked = {source_nodes[i] for i, k in alignment if k == j and i < len(source_nodes)}
        costs.append(
            [
                float("inf") if not text else 0.0 if (i in linked or not linked) else 1.0
                for i, text in enumerate(text_nodes)
            ]
        )
    return costs
