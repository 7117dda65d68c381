"""`python -m nmt ...` (and `torchrun -m nmt ...`) run the CLI."""

import sys

from .cli import main

sys.exit(main())
