"""Zip packages (Office, OpenDocument, EPUB): read safely, written back with only some parts changed.

A .docx, .pptx, .xlsx, .odt, .odp, .ods or .epub file is a zip of XML parts. The limits below are
checked on the zip's directory before any member is decompressed, so a zip bomb (a few kilobytes
that inflate to gigabytes) is refused without being inflated. Encrypted Office files are not zips
at all but OLE compound files, as are the old binary formats (.doc, .xls, .ppt): both are refused
by name.

Written back, the package keeps every member in its order with its name, date, attributes and
compression; members not translated keep their exact bytes (macros in a .docx that carries them
are copied, never run). An ODF or EPUB's `mimetype` stays first and stored, as its readers require.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass
from lzma import LZMAError

from .errors import DocumentError

MAX_MEMBERS = 10_000
MAX_UNCOMPRESSED = 512 << 20  # bytes, all members together
MAX_RATIO = 200  # uncompressed / compressed, for a member over RATIO_FLOOR bytes
RATIO_FLOOR = 1 << 20
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: an encrypted or pre-2007 Office file


@dataclass
class Package:
    """A zip's members, in order, with their bytes; `replace` a member, then `written()`."""

    name: str  # the file's name, for messages
    infos: list[zipfile.ZipInfo]
    data: dict[str, bytes]

    @classmethod
    def read(cls, content: bytes, name: str) -> Package:
        """The members of a zip file, checked against the limits before any is decompressed;
        DocumentError naming the file for one that is not a zip, encrypted, corrupt or too large."""
        if content.startswith(OLE_MAGIC):
            raise DocumentError(
                f"{name}: an encrypted or pre-2007 Office file (an OLE compound file): remove the password, "
                "or save it as .docx/.xlsx/.pptx"
            )
        try:
            archive = zipfile.ZipFile(io.BytesIO(content))
        # NotImplementedError: a zip version zipfile does not read; ValueError: a member's name marked
        # UTF-8 that is not (UnicodeDecodeError), a directory pointing before the file's start
        except (zipfile.BadZipFile, OSError, NotImplementedError, ValueError) as err:
            raise DocumentError(f"{name}: not a zip package ({err}): the file is corrupt or not of its kind") from None
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise DocumentError(f"{name}: {len(infos)} zip members, more than {MAX_MEMBERS}", too_large=True)
        total = sum(info.file_size for info in infos)
        if total > MAX_UNCOMPRESSED:
            raise DocumentError(
                f"{name}: {total >> 20} MiB once unzipped, more than {MAX_UNCOMPRESSED >> 20} MiB", too_large=True
            )
        for info in infos:
            if info.flag_bits & 0x1:
                raise DocumentError(f"{name}: {info.filename} is encrypted: remove the password first")
            if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(1, info.compress_size):
                raise DocumentError(
                    f"{name}: {info.filename} inflates {info.file_size // max(1, info.compress_size)} times "
                    f"(more than {MAX_RATIO}): refused as a possible zip bomb",
                    too_large=True,
                )
        data = {}
        try:
            for info in infos:
                data[info.filename] = archive.read(info)
        # ValueError: a directory whose offsets point before the file's start ("negative seek value");
        # zlib.error, LZMAError: a member's compressed data corrupt (bz2's is an OSError)
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, ValueError, zlib.error, LZMAError) as err:
            raise DocumentError(f"{name}: a corrupt zip member ({err})") from None
        return cls(name, infos, data)

    def names(self, prefix: str = "", suffix: str = "") -> list[str]:
        """Member names that start with `prefix` and end with `suffix`, in the zip's order."""
        return [i.filename for i in self.infos if i.filename.startswith(prefix) and i.filename.endswith(suffix)]

    def written(self) -> bytes:
        """The package as a zip, every member as read unless replaced."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for info in self.infos:
                archive.writestr(info, self.data[info.filename])
        return out.getvalue()
