"""Files that are never seen half-written, and the leftovers of writers that died.

Every file nmt rewrites goes through `atomic_write`: the bytes go to a temporary file in the
same folder, are flushed to disk, and the temporary file is renamed over the target (atomic on
POSIX), so a reader or a crash at any moment sees the old file or the new one, never a mix.

A writer killed between the two steps leaves its temporary file behind. The temporary name
carries the writer's host and process id (`.<name>.<host>-<pid>.<random>.tmp`), so
`remove_stale_temp_files` can tell a dead writer's leftover from a live writer's work.

Two processes that would make the same file (a download, a CTranslate2 export) take turns through
`exclusive`, a lock file held with flock; `sha256_of` is what a file's checksum means here.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)

_TEMP_NAME = re.compile(r"^\..+\.(?P<host>[^.]*)-(?P<pid>\d+)\.[^.]+\.tmp$")
# A leftover from another host (a shared filesystem) cannot be checked for life: only its age tells.
_FOREIGN_TEMP_AGE_S = 24 * 3600


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40]


def temp_path_for(path: str | Path) -> Path:
    """A new empty temporary file beside `path`, named so a later run can tell if its writer died."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_host()}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~umask())  # mkstemp's 0600 would become the target's mode at the rename
    os.close(fd)
    return Path(tmp)


def umask() -> int:
    """The process's umask, read without changing it (os.umask can only set it, and setting it back
    leaves a moment where another thread would create files under the wrong mask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # not Linux: the brief set-and-restore is all POSIX offers
    os.umask(mask)
    return mask


def fsync_dir(folder: str | Path) -> None:
    """Make a rename in `folder` durable (the directory entry itself is flushed)."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def sha256_of(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write(path: str | Path, write: Callable[[str], None]) -> None:
    """Call write(tmp_path), fsync it, then rename it over `path`.

    A failed write leaves `path` as it was and is an OSError naming it: writers fail in their
    own words (torch.save on a full disk: "enforce fail at inline_container.cc ... file write
    failed"), which name neither the file nor the likely cause.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path_for(path)
    except OSError as err:
        raise OSError(err.errno, f"cannot write {path}: {err.strerror}") from None
    try:
        write(str(tmp))
        with open(tmp, "rb+") as f:
            # Files follow the umask, as open() makes them (metrics.jsonl): a writer may have made its
            # own file 0600 (safetensors does), and a model directory that only its trainer can read
            # cannot be served by a service account (www-data, a container's user).
            os.fchmod(f.fileno(), 0o666 & ~umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except Exception as err:
        tmp.unlink(missing_ok=True)
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
        free = shutil.disk_usage(path.parent).free
        hint = f" (disk full: {free} bytes free)" if free < 64 * 1024 * 1024 else ""
        message = f"cannot write {path}: {reason}{hint}"
        errno = getattr(err, "errno", None)
        raise (OSError(errno, message) if errno else OSError(message)) from err
    except BaseException:  # KeyboardInterrupt, SystemExit: no half file either
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@contextmanager
def staged_directory(out_dir: str | Path, *, replace: bool = False) -> Iterator[Path]:
    """A directory written beside `out_dir` and renamed to it when the block ends without error, so
    `out_dir` appears whole or not at all; a failure removes what was written. With `replace`, an
    existing `out_dir` is removed just before the rename (the caller decides when that is allowed)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    staging.chmod(0o777 & ~umask())  # mkdtemp's 0700 would close the finished directory to other users
    try:
        yield staging
        if replace and out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextmanager
def staged_text_file(path: str | Path) -> Iterator[TextIO]:
    """A UTF-8 text file to write, beside `path`, renamed to it when the block ends without error: a
    failure part-way leaves no partial file, and an earlier `path` as it was."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    tmp = temp_path_for(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """`atomic_write` for a UTF-8 text file."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_temp_files(folder: str | Path) -> list[Path]:
    """Delete the temporary files in `folder` whose writer is dead; returns what was deleted.

    A writer on this host is dead when its process id no longer runs; one on another host
    (a shared filesystem) when its file is a day old.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed, host, now = [], _host(), time.time()
    for path in folder.iterdir():
        match = _TEMP_NAME.match(path.name)
        if not match or not path.is_file():
            continue
        pid = int(match["pid"])
        if match["host"] == host:
            stale = pid != os.getpid() and not _alive(pid)
        else:
            try:
                stale = now - path.stat().st_mtime > _FOREIGN_TEMP_AGE_S
            except FileNotFoundError:
                continue
        if stale:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextmanager
def exclusive(lock_path: Path, *, waiting: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the ``with`` block; log ``waiting`` if it is taken.

    The lock file is created if missing and deleted on the way out while
    still locked. A waiter blocked on the old file then wakes up holding a
    file no longer at ``lock_path``, one that a newcomer would not see (it
    creates a new one): so a lock counts only while its file is the one at
    ``lock_path``, otherwise we try again on what is there now. Not
    re-entrant: a process that takes the same lock twice waits for itself.
    """
    logged = False
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not logged:
                    log.info("%s", waiting)
                    logged = True
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if its holder dies
            if _same_file(fd, lock_path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the file now at ``path``."""
    try:
        at_path = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)
