"""What the replicas of one service share: the rate-limit windows, the translated files waiting to be
fetched and the translation cache; kept in the process (one server, the default) or in Redis
(several behind a proxy).

    nmt serve --model runs/de_en --req-limit 120 --state redis://127.0.0.1:6379/0   # or NMT_STATE=...

ProcessState keeps everything in the process, as a single server always has. RedisState keeps it in
a Redis server through redis-py, so that every replica counts in the same windows and any replica
serves a file that another translated:

- an admission is one Lua script (`ADMIT`): the window's old entries dropped, counted, and the new
  ones added in one step on the server, timed by the server's clock, so two replicas never both
  take the last unit and their clocks need not agree;
- a translated file is one key with an expiry, listed in a sorted set that keeps the newest
  MAX_DOWNLOADS (`KEEP`); fetching it is GETDEL, so of two replicas asked at once one gets it;
- a cached translation is one key per sentence (the service makes the key: service.py), kept
  CACHE_TTL_S; in the process, the newest `cache_size` sentences (least recently used leave).

Faults (docs/serving.md, "Several replicas"): Redis unreachable at start is the caller's error (the
CLI's one line, exit 2). Lost while serving, the replica goes on alone: limits count in its own
window (from the moment it lost Redis), new files are kept in its own store, a download it does
not hold is a 503 with Retry-After, the cache is skipped (every sentence searched), and /readyz
and /health say so; the loss and the return are logged once each. Every call has a short socket
timeout (TIMEOUT_S) and no retries, and while Redis is down requests do not try it at all: a
watcher thread pings it every RETRY_S and brings it back by itself. Redis calls are made on the
event loop: a round trip on loopback is a fraction of a millisecond, and a dead server costs at
most one timeout before the requests stop trying.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .keys import WINDOW_S, RateLimiter

log = logging.getLogger(__name__)

MAX_DOWNLOADS = 100  # translated files waiting to be fetched, at most (the oldest make room)
DOWNLOAD_EXPIRY_S = 1800  # a translated file nobody fetched within half an hour is dropped
TIMEOUT_S = 0.25  # every Redis call, connecting included: no request waits longer on a dead server
RETRY_S = 0.5  # how often the watcher pings Redis (so it is found lost, and back, within this)
PREFIX = "nmt:"  # every key nmt writes; another service on the same Redis should use another db
CACHE_SIZE = 10_000  # sentences the process's own translation cache keeps (a few MB)
CACHE_TTL_S = 24 * 3600  # how long Redis keeps a cached translation


class FilesUnavailable(Exception):
    """A download this replica does not hold, while the shared store that may hold it is unreachable."""


class SharedState(ABC):
    """The rate-limit windows (`limiter`, for keys.Admission) and the translated files of a service."""

    limiter: Any  # what keys.Admission takes: take(identity, limit, cost) -> None or seconds to wait

    @abstractmethod
    def keep_file(self, name: str, content: bytes) -> None:
        """Keep a translated file until fetched (or MAX_DOWNLOADS newer ones, or DOWNLOAD_EXPIRY_S)."""

    @abstractmethod
    def take_file(self, name: str) -> bytes | None:
        """The file's bytes, once: None if it was never kept, was fetched already, or expired.
        FilesUnavailable where it cannot be known now (the shared store is unreachable)."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """What /readyz and /health say of it: {"kind", "reachable", ...}."""

    @property
    @abstractmethod
    def caching(self) -> bool:
        """Whether translations are cached at all (`--translation-cache 0`: not)."""

    @abstractmethod
    def cached(self, keys: list[str]) -> list[bytes | None]:
        """Each key's cached answer, or None (not cached, or the cache unreachable: skipped)."""

    @abstractmethod
    def cache(self, answers: dict[str, bytes]) -> None:
        """Keep these answers by their keys (skipped where the cache is unreachable)."""

    @abstractmethod
    def start(self) -> None:
        """Called as the app starts (the watcher thread, where there is one)."""

    @abstractmethod
    def close(self) -> None:
        """Called as the app stops: what is the process's own is dropped."""


class FileStore:
    """Translated files in a folder of this process's own (the process's state, and Redis's stand-in
    while it is unreachable): at most MAX_DOWNLOADS, none older than DOWNLOAD_EXPIRY_S."""

    def __init__(self, clock=time.time):
        self.folder = Path(tempfile.mkdtemp(prefix="nmt-files-"))
        self.clock = clock
        self._lock = threading.Lock()

    def keep(self, name: str, content: bytes) -> None:
        with self._lock:
            self.folder.mkdir(exist_ok=True)  # an app run again after its lifespan ended
            kept = sorted(self.folder.iterdir(), key=lambda p: p.stat().st_mtime)
            too_old = self.clock() - DOWNLOAD_EXPIRY_S
            for old in kept[: max(0, len(kept) - MAX_DOWNLOADS + 1)] + [p for p in kept if p.stat().st_mtime < too_old]:
                old.unlink(missing_ok=True)
            (self.folder / name).write_bytes(content)

    def take(self, name: str) -> bytes | None:
        path = self.folder / name
        with self._lock:  # two fetches at once: one gets the file
            try:
                fresh = path.stat().st_mtime >= self.clock() - DOWNLOAD_EXPIRY_S
                content = path.read_bytes()
            except FileNotFoundError:
                return None
            path.unlink(missing_ok=True)  # fetched once: the server keeps no one's documents
        return content if fresh else None

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)  # translated files nobody fetched


class ProcessState(SharedState):
    """Everything in this process: one server, as without --state. cache_size: the sentences its
    translation cache keeps, the least recently used leaving first (0: no cache)."""

    def __init__(self, cache_size: int = CACHE_SIZE):
        self.limiter = RateLimiter()
        self.files = FileStore()
        self.cache_size = cache_size
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_lock = threading.Lock()

    @property
    def caching(self) -> bool:
        return self.cache_size > 0

    def cached(self, keys: list[str]) -> list[bytes | None]:
        with self._cache_lock:
            found = [self._cache.get(key) for key in keys]
            for key, answer in zip(keys, found, strict=True):
                if answer is not None:
                    self._cache.move_to_end(key)
        return found

    def cache(self, answers: dict[str, bytes]) -> None:
        with self._cache_lock:
            self._cache.update(answers)
            for key in answers:
                self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def keep_file(self, name: str, content: bytes) -> None:
        self.files.keep(name, content)

    def take_file(self, name: str) -> bytes | None:
        return self.files.take(name)

    def status(self) -> dict[str, Any]:
        return {"kind": "process", "reachable": True}

    def start(self) -> None:
        pass  # nothing to watch: it is this process

    def close(self) -> None:
        self.files.drop()


# KEYS[1]: the identity's window, a sorted set of its admitted units scored by time (microseconds).
# ARGV: the limit, this request's cost, the window (microseconds), a token unique to this call.
# Returns -1 when admitted, else the whole seconds to wait: the same rule as keys.RateLimiter.take.
ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, cost, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local held = redis.call('ZCARD', KEYS[1])
if held + cost > limit then
  if cost > limit or held == 0 then return math.ceil(window / 1000000) end
  local leaving = redis.call('ZRANGE', KEYS[1], held + cost - limit - 1, held + cost - limit - 1, 'WITHSCORES')
  return math.max(1, math.ceil((tonumber(leaving[2]) + window - now) / 1000000))
end
for i = 1, cost do redis.call('ZADD', KEYS[1], now, ARGV[4] .. ':' .. i) end
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return -1
"""

# KEYS[1]: the index of kept files (a sorted set of names by the time kept), KEYS[2]: the file's key.
# ARGV: the name, the bytes, the most files kept, their expiry (seconds), the files' key prefix.
# The oldest files beyond the bound are deleted with their index entries; expired ones left the
# index here and their keys by themselves.
KEEP = """
local now = tonumber(redis.call('TIME')[1])
local expiry = tonumber(ARGV[4])
redis.call('SET', KEYS[2], ARGV[2], 'EX', expiry)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - expiry)
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if extra > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[1], 0, extra - 1)) do redis.call('DEL', ARGV[5] .. old) end
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1)
end
redis.call('EXPIRE', KEYS[1], expiry)
"""


def shown_url(url: str) -> str:
    """The URL without its password, for logs and /health."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))


class RedisState(SharedState):
    """The service's state in Redis (see the module's docstring for the policy on faults).

    Construct it with `connect`, which checks that the server answers."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S, retry_s: float = RETRY_S, cache: bool = True):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url, self.retry_s, self._caching = shown_url(url), retry_s, cache
        # No retries: a request falls back at the first failure rather than waiting through several.
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
            client_name="nmt",
        )
        self.errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self.admit_script = self.client.register_script(ADMIT)  # EVALSHA, loaded again after a restart
        self.keep_script = self.client.register_script(KEEP)
        self.local_limiter, self.local_files = RateLimiter(), FileStore()
        self.limiter = SharedLimiter(self)
        self._lost_at: float | None = None  # time.monotonic() when Redis was lost; None while reachable
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    @classmethod
    def connect(cls, url: str, **options: Any) -> RedisState:
        """The state at `url` (redis://host:port/db), once its server answered a PING; ConnectionError
        (naming the URL, never its password) where it does not."""
        state = cls(url, **options)
        try:
            state.client.ping()
        except state.errors as err:
            raise ConnectionError(f"the shared state {state.url} does not answer: {err}") from None
        return state

    # --- reachability -------------------------------------------------------------------------------
    @property
    def up(self) -> bool:
        return self._lost_at is None

    def lost(self, err: Exception) -> None:
        """A call failed: go on alone until the watcher finds Redis again (logged once per outage)."""
        with self._lock:
            if self._lost_at is not None:
                return
            self._lost_at = time.monotonic()
        log.warning(
            "shared state %s lost (%s): limits count in this replica's own window, files stay in its own "
            "store, until it answers again",
            self.url,
            " ".join(str(err).split()) or type(err).__name__,
        )

    def found(self) -> None:
        with self._lock:
            if self._lost_at is None:
                return
            took, self._lost_at = time.monotonic() - self._lost_at, None
        log.warning("shared state %s answers again after %.1f s: limits and files are shared again", self.url, took)

    def watch(self) -> None:
        """Ping every retry_s: finds Redis lost without traffic, and back without a request paying for it."""
        while not self._stop.wait(self.retry_s):
            try:
                self.client.ping()
            except self.errors as err:
                self.lost(err)
            else:
                self.found()

    def start(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._stop.clear()
            self._watcher = threading.Thread(target=self.watch, name="nmt-shared-state", daemon=True)
            self._watcher.start()

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(self.retry_s + 1)
        self.local_files.drop()
        self.client.close()

    def status(self) -> dict[str, Any]:
        lost_at = self._lost_at
        body: dict[str, Any] = {"kind": "redis", "url": self.url, "reachable": lost_at is None}
        if lost_at is not None:
            body["lost_for_s"] = round(time.monotonic() - lost_at, 1)
        return body

    # --- the state ----------------------------------------------------------------------------------
    def take_units(self, identity: str, limit: int, cost: int) -> int | None:
        """keys.RateLimiter.take over the shared window; this replica's own while Redis is lost."""
        if self.up:
            try:
                wait = self.admit_script(
                    keys=[f"{PREFIX}limit:{identity}"], args=[limit, cost, int(WINDOW_S * 1e6), uuid.uuid4().hex]
                )
                return None if wait < 0 else int(wait)
            except self.errors as err:
                self.lost(err)
        return self.local_limiter.take(identity, limit, cost)

    def keep_file(self, name: str, content: bytes) -> None:
        if self.up:
            try:
                keys = [f"{PREFIX}files", f"{PREFIX}file:{name}"]
                self.keep_script(keys=keys, args=[name, content, MAX_DOWNLOADS, DOWNLOAD_EXPIRY_S, f"{PREFIX}file:"])
                return
            except self.errors as err:
                self.lost(err)
        self.local_files.keep(name, content)  # fetched through this replica only, as a single server's

    def take_file(self, name: str) -> bytes | None:
        content = self.local_files.take(name)  # kept here while Redis was lost
        if content is not None:
            return content
        if self.up:
            try:
                with self.client.pipeline(transaction=True) as pipe:  # MULTI: the file and its index entry
                    content, _ = pipe.getdel(f"{PREFIX}file:{name}").zrem(f"{PREFIX}files", name).execute()
                return content
            except self.errors as err:
                self.lost(err)
        raise FilesUnavailable(f"the shared file store {self.url} is unreachable")

    @property
    def caching(self) -> bool:
        return self._caching

    def cached(self, keys: list[str]) -> list[bytes | None]:
        if self.up and keys:
            try:
                return self.client.mget([f"{PREFIX}cache:{key}" for key in keys])
            except self.errors as err:
                self.lost(err)
        return [None] * len(keys)  # skipped: searched again, as without a cache

    def cache(self, answers: dict[str, bytes]) -> None:
        if self.up and answers:
            try:
                with self.client.pipeline(transaction=False) as pipe:  # one round trip for them all
                    for key, answer in answers.items():
                        pipe.set(f"{PREFIX}cache:{key}", answer, ex=CACHE_TTL_S)
                    pipe.execute()
            except self.errors as err:
                self.lost(err)


class SharedLimiter:
    """keys.Admission's limiter over a RedisState (its take is RateLimiter.take's)."""

    def __init__(self, state: RedisState):
        self.state = state

    def take(self, identity: str, limit: int, cost: int = 1) -> int | None:
        """Spend `cost` units; None when allowed, else the whole seconds to wait (Retry-After)."""
        return self.state.take_units(identity, limit, cost)


def open_state(url: str | None, cache_size: int = CACHE_SIZE) -> SharedState:
    """The state a server's replicas share: in the process without a URL, else in Redis at `url`
    (redis://host:port/db, rediss:// with TLS, unix:///path.sock?db=N). cache_size: the sentences
    the process's translation cache keeps; 0 turns the cache off (in Redis too, where entries
    expire after CACHE_TTL_S instead). ValueError for another scheme; ConnectionError when the
    server does not answer."""
    if not url:
        return ProcessState(cache_size)
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"--state {shown_url(url)}: expected redis://HOST:PORT/DB (or rediss://, unix://)")
    return RedisState.connect(url, cache=cache_size > 0)
