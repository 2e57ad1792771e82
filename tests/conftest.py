"""Fixtures shared by every test folder."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus; tests over it are extra and say so when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not present at {CORPUS} (clone-only checkout): corpus tests not run")
    return CORPUS
