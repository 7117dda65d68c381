import os
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]

def multi30k_root() -> Path:
    """The local Multi30k mirror (../shared/data/multi30k from the repo root, or $NMT_MIRROR)."""
    return Path(os.environ.get("NMT_MIRROR", REPO.parent / "shared" / "data" / "multi30k"))

@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    root = multi30k_root()
    if not (root / "data/task1/raw/train.en.gz").exists():
        pytest.fail(f"Multi30k mirror not found at {root}; set NMT_MIRROR")
    return root
