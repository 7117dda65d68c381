"""The one error a document file raises: what is wrong, naming the file."""

from __future__ import annotations

import re

# Where str.splitlines breaks a line: a message quoting a file's own names or text keeps them escaped.
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


class DocumentError(ValueError):
    """A document that cannot be translated (corrupt, encrypted, too large, unsafe, or of a kind nmt
    does not read), its message naming the file: one line, whatever the file's names hold (a zip
    member's name may hold a line break). `too_large`: refused for its size (HTTP 413)."""

    def __init__(self, message: str, *, too_large: bool = False):
        super().__init__(_LINE_BREAKS.sub(lambda found: repr(found.group())[1:-1], message))
        self.too_large = too_large
