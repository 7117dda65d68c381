"""Small corpus archives built in a test's tmp_path, and the NamedArchive entries that register them."""

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
