"""Who may translate, and how often: optional API keys, each with its own rate limit, and a limit per
client address.

    nmt serve --model runs/de_en --api-keys keys.txt --req-limit 120

keys.txt holds one key a line, optionally followed by that key's requests per minute (no number:
no limit of its own); blank lines and text after '#' are ignored:

    k3Jx9-team-a   600
    Pq77f-team-b          # unlimited

With keys, every translation request must carry one: LibreTranslate's `api_key` field, or the
`X-API-Key` header on nmt's own API. A missing or wrong key is 403, the same answer whichever key
was tried: keys are kept as SHA-256 digests and each one offered is compared with every digest in
constant time (hmac.compare_digest, no early exit), so neither the answer nor its timing tells
whether a key exists; keys are never logged. Over a limit is 429 with Retry-After (seconds until
the oldest request in the window leaves it). `--req-limit` applies to every client address, keyed
or not (behind a reverse proxy, every client has the proxy's address: limit there instead). A
request of several texts costs one per text, as in LibreTranslate.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

WINDOW_S = 60.0  # limits are per minute, as LibreTranslate's


@dataclass(frozen=True)
class ApiKey:
    digest: bytes  # SHA-256 of the key: the key itself is not kept
    per_minute: int | None  # None: no limit of its own
    name: str  # "key 3" (its line in the file): what the rate limiter and messages may say


class ApiKeys:
    """The keys a server accepts."""

    def __init__(self, keys: list[ApiKey]):
        if not keys:
            raise ValueError("an API key file must hold at least one key")
        self.keys = keys

    @classmethod
    def load(cls, path: str | Path) -> ApiKeys:
        """Read a key file; a bad line is a ValueError naming the file and line (never the key)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None
        keys, seen = [], set()
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2 or (len(words) == 2 and not (words[1].isdigit() and int(words[1]) > 0)):
                raise ValueError(f"{path}:{number}: expected KEY [REQUESTS_PER_MINUTE > 0]")
            if len(words[0]) < 8:
                raise ValueError(f"{path}:{number}: a key must be at least 8 characters")
            digest = hashlib.sha256(words[0].encode()).digest()
            if digest in seen:
                raise ValueError(f"{path}:{number}: the same key is listed twice")
            seen.add(digest)
            keys.append(ApiKey(digest, int(words[1]) if len(words) == 2 else None, f"key {number}"))
        if not keys:
            raise ValueError(f"{path}: no keys (one a line: KEY [REQUESTS_PER_MINUTE])")
        return cls(keys)

    def find(self, offered: str | None) -> ApiKey | None:
        """The key offered, or None; the same work whatever is offered (every digest is compared)."""
        # surrogatepass: a lone surrogate ("\ud800" in JSON) hashes like any other wrong key, and is
        # refused with 403, instead of failing to encode before any key is checked
        digest = hashlib.sha256((offered or "").encode("utf-8", "surrogatepass")).digest()
        found = None
        for key in self.keys:
            if hmac.compare_digest(key.digest, digest) and offered:
                found = key
        return found


class Limiter(Protocol):
    """Where the windows are counted: a RateLimiter in this process, or the replicas' shared one
    (shared_state.py: the same rule in a Redis script)."""

    def take(self, identity: str, limit: int, cost: int = 1) -> int | None: ...


class RateLimiter:
    """At most `limit` units per identity in any WINDOW_S seconds (a sliding log of timestamps)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._log: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()
        self._next_prune = 0.0

    def take(self, identity: str, limit: int, cost: int = 1) -> int | None:
        """Spend `cost` units; None when allowed, else the whole seconds to wait (Retry-After)."""
        now = self.clock()
        with self._lock:
            if now >= self._next_prune:  # forget quiet identities: the table stays as big as the traffic
                self._log = {k: v for k, v in self._log.items() if v and v[-1] > now - WINDOW_S}
                self._next_prune = now + WINDOW_S
            times = self._log.setdefault(identity, collections.deque())
            while times and times[0] <= now - WINDOW_S:
                times.popleft()
            if len(times) + cost > limit:
                if cost > limit or not times:  # more than the limit in one request: never possible
                    return math.ceil(WINDOW_S)
                # wait until enough of the oldest leave the window
                leaving = times[len(times) + cost - limit - 1]
                return max(1, math.ceil(leaving + WINDOW_S - now))
            times.extend([now] * cost)
            return None


def too_large(cost: int, limit: int) -> Refusal:
    """A request that alone counts more than a whole minute's limit: no wait would let it through
    (a 429 would be retried forever), so 413, saying what to do."""
    return Refusal(
        413, f"this request counts {cost} texts, more than the limit of {limit} per minute: send it in parts"
    )


@dataclass(frozen=True)
class Refusal:
    """Why a request may not be translated: 403 (key), 413 (larger than a whole minute's limit) or
    429 (rate), and when to retry."""

    status: int
    message: str
    retry_after_s: int | None = None


class Admission:
    """The keys and limits a server applies to each translation request, and whose translations a
    request may be answered with from the translation cache (`cache_scope`).

    cache_per_key (where keys are in use): each key has a cache of its own, for a hit is faster than
    a search, and its speed would tell one key's holder which texts another has translated.
    """

    def __init__(
        self,
        keys: ApiKeys | None = None,
        per_address: int = 0,
        limiter: Limiter | None = None,
        *,
        cache_per_key: bool = True,
    ):
        self.keys, self.per_address = keys, per_address
        self.limiter = limiter or RateLimiter()
        self.cache_per_key = cache_per_key

    def with_limiter(self, limiter: Limiter) -> Admission:
        """The same keys and rules, counted in `limiter`'s windows (the replicas' shared ones)."""
        return Admission(self.keys, self.per_address, limiter, cache_per_key=self.cache_per_key)

    def cache_scope(self, offered_key: str | None) -> str | None:
        """The translation-cache scope of a request admitted with this key: the key's SHA-256 (as
        ApiKeys keeps it; never the key) where each key has its own, None for the service's one."""
        if self.keys is None or not self.cache_per_key or not offered_key:
            return None
        return hashlib.sha256(offered_key.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def keys_required(self) -> bool:
        return self.keys is not None

    def check(self, offered_key: str | None, address: str, cost: int = 1) -> Refusal | None:
        """None when the request may go ahead (its cost is then spent), else the refusal."""
        if self.keys is not None:
            key = self.keys.find(offered_key)
            if key is None:
                if not offered_key:
                    return Refusal(403, "Please contact the server operator to get an API key")
                return Refusal(403, "Invalid API key")
            if key.per_minute is not None:
                if cost > key.per_minute:
                    return too_large(cost, key.per_minute)
                wait = self.limiter.take(key.name, key.per_minute, cost)
                if wait is not None:
                    return Refusal(429, f"Slowdown: {key.per_minute} per 1 minute", wait)
        if self.per_address:
            if cost > self.per_address:
                return too_large(cost, self.per_address)
            wait = self.limiter.take(f"address {address}", self.per_address, cost)
            if wait is not None:
                return Refusal(429, f"Slowdown: {self.per_address} per 1 minute", wait)
        return None
