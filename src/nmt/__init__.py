"""nmt: Transformer neural machine translation, end to end."""

__version__ = "0.1.0"
