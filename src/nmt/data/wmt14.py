"""WMT14 English-German: the three training corpora concatenated, and newstest2013/2014 through sacreBLEU.

``train`` is Europarl v7, Common Crawl and News Commentary v9, each the
``de-en`` pair of its archive, in that order (the training data of
Vaswani et al. 2017, as fairseq's prepare-wmt14en2de.sh --icml17 gathers
it; commonly given as 1,920,209 + 2,399,123 + 201,288 = 4,520,620 lines,
not checked here). Pairs with an empty side are dropped; nothing else is
filtered or normalised (nmt's length filters apply at training).

The test sets come from sacreBLEU's own download (``sacrebleu.utils``):
``newstest2013`` is its ``wmt13`` set (the usual validation set), and
``newstest2014`` its ``wmt14/full`` set: the 3,003 sentences papers report
on (sacreBLEU's plain ``wmt14`` is the 2,737-sentence filtered version).
sacreBLEU keeps them under ``$SACREBLEU`` (default ``~/.sacrebleu``),
checks its own md5 sums, and the paths returned are its plain-text files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .archive import NamedArchive
from .archive_corpus import ArchiveCorpus, Build, Members, PairWriter
from .download import CorpusDownloadError, exclusive

__all__ = ["WMT14_ARCHIVES", "WMT14", "SACREBLEU_TEST_SETS", "sacrebleu_test_files"]

_EUROPARL = NamedArchive(
    filename="training-parallel-europarl-v7.tgz",
    urls=("https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",),
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
    size=657_632_379,
)
_COMMONCRAWL = NamedArchive(
    filename="training-parallel-commoncrawl.tgz",
    urls=("https://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",),
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
    size=918_311_367,
)
_NEWS_COMMENTARY = NamedArchive(
    filename="training-parallel-nc-v9.tgz",
    urls=("https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",),
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
    size=80_418_416,
)
# Each archive with the stem of its de-en files, "<stem>.de" and "<stem>.en".
WMT14_TRAIN: tuple[tuple[NamedArchive, str], ...] = (
    (_EUROPARL, "training/europarl-v7.de-en"),
    (_COMMONCRAWL, "commoncrawl.de-en"),
    (_NEWS_COMMENTARY, "training/news-commentary-v9.de-en"),
)
WMT14_ARCHIVES = tuple(archive for archive, _ in WMT14_TRAIN)

# Our split name -> sacreBLEU's test set.
SACREBLEU_TEST_SETS = {"newstest2013": "wmt13", "newstest2014": "wmt14/full"}


def wmt14_build(
    split: str, pair: tuple[str, str], *, train: tuple[tuple[NamedArchive, str], ...] = WMT14_TRAIN
) -> Build:
    """The train split: the de-en files of each archive, concatenated in order."""
    members = tuple((archive, tuple(f"{stem}.{lang}" for lang in pair)) for archive, stem in train)

    def write(found: Members, out: PairWriter) -> None:
        for _, stem in train:
            for a, b in found.pairs(f"{stem}.{pair[0]}", f"{stem}.{pair[1]}"):
                out.add("train", a, b)

    return Build(folder="-".join(pair) + ".train", langs=pair, splits=("train",), members=members, write=write)


def sacrebleu_test_files(test_set: str, src: str, tgt: str) -> tuple[Path, Path]:
    """sacreBLEU's plain-text source and (first) reference file of ``test_set`` for ``src``-``tgt``.

    sacreBLEU downloads and converts them first if need be. Its failures
    become one-line ``CorpusDownloadError``s naming the set and its URL.
    """
    import sacrebleu.dataset  # here, not at the top: importing sacreBLEU costs a second nmt rarely needs
    import sacrebleu.utils

    langpair = f"{src}-{tgt}"
    where = ", ".join(getattr(sacrebleu.dataset.DATASETS.get(test_set), "data", None) or ["sacreBLEU"])
    try:
        source = sacrebleu.utils.get_source_file(test_set, langpair)
        reference = sacrebleu.utils.get_reference_files(test_set, langpair)[0]
    except SystemExit:  # sacreBLEU exits on a bad md5 or an SSL error, after logging why
        raise CorpusDownloadError(
            f"sacreBLEU could not fetch the test set {test_set} ({langpair}) from {where}; its log above says why"
        ) from None
    except Exception as exc:  # sacreBLEU raises bare Exceptions and urllib errors alike
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise CorpusDownloadError(
            f"sacreBLEU could not fetch the test set {test_set} ({langpair}) from {where}: "
            f"{reason}. Without network access, copy a ~/.sacrebleu that has it "
            "(or set SACREBLEU to one)"
        ) from None
    return Path(source), Path(reference)


def _test_set(split: str) -> Callable[[tuple[str, str], Path], tuple[Path, Path]]:
    """How to get the files of one sacreBLEU test set: under a lock in our cache, as sacreBLEU locks
    only its download, not the writing of its text files."""

    def files(pair: tuple[str, str], corpus_dir: Path) -> tuple[Path, Path]:
        corpus_dir.mkdir(parents=True, exist_ok=True)
        with exclusive(corpus_dir / f"{split}.lock", waiting=f"waiting for another process to fetch {split}"):
            return sacrebleu_test_files(SACREBLEU_TEST_SETS[split], *pair)

    return files


WMT14 = ArchiveCorpus(
    name="wmt14",
    pairs=(("en", "de"),),
    splits=("train", *SACREBLEU_TEST_SETS),
    archives=WMT14_ARCHIVES,
    build=wmt14_build,
    extra={split: _test_set(split) for split in SACREBLEU_TEST_SETS},
    notes="Europarl v7 + Common Crawl + News Commentary v9 (~4.5M pairs); test sets through sacreBLEU",
    citation=(
        "Bojar et al. (2014), Findings of the 2014 Workshop on Statistical Machine Translation. Europarl "
        "(Koehn 2005), Common Crawl (Smith et al. 2013), News Commentary (CASMACAT/WMT)."
    ),
)
