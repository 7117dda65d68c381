"""Small corpus archives built in a test's tmp_path, the NamedArchive entries that register them, and
mirrors that hold an archive's members as files of their own."""

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

from nmt.data.archive import NamedArchive


def make_archive(path: Path, members: dict[str, str | bytes]) -> bytes:
    """Write a .tar.gz holding ``members`` (name -> text or bytes) at ``path``; its bytes."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            data = data.encode() if isinstance(data, str) else data
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return path.read_bytes()


def entry(filename: str, body: bytes, *urls: str, checksum: bool = True) -> NamedArchive:
    """A NamedArchive for ``body`` served at ``urls``: with its real size and sha256, or none (unpublished)."""
    if not checksum:
        return NamedArchive(filename, urls, None, None)
    return NamedArchive(filename, urls, hashlib.sha256(body).hexdigest(), len(body))


def write_loose(folder: Path, files: dict[str, str], *, compressed: bool = True) -> dict[str, str]:
    """Write ``files`` (relpath -> text) below ``folder``, each gzip-compressed to ``<relpath>.gz`` or plain,
    as a mirror repacking an archive's folder would; the sha256 of each text, to pin (relpath -> sha256)."""
    for relpath, text in files.items():
        path = folder / (relpath + ".gz" if compressed else relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode(), mtime=0) if compressed else text.encode())
    return {relpath: hashlib.sha256(text.encode()).hexdigest() for relpath, text in files.items()}
