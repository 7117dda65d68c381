"""The one error a document file raises: what is wrong, naming the file."""

from __future__ import annotations


class DocumentError(ValueError):
    """A document that cannot be translated (corrupt, encrypted, too large, unsafe, or of a kind nmt
    does not read), its message naming the file. `too_large`: refused for its size (HTTP 413)."""

    def __init__(self, message: str, *, too_large: bool = False):
        super().__init__(message)
        self.too_large = too_large
