"""Imports kept out of the collector's way. Importing the engine makes a great many objects
and frees almost none, so the collector's passes over them find nothing (about 10 ms of a
one-file lint): none run while it is imported, and what was made is then frozen, out of the
way of the command's own work (as serve's workers freeze what they loaded)."""

from __future__ import annotations

import gc
import importlib
import sys
from types import ModuleType


def import_frozen(name: str) -> ModuleType:
    """The module `name`, imported with collection off, and everything alive then frozen."""
    if name in sys.modules:
        return sys.modules[name]
    enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        if enabled:
            gc.enable()
        gc.freeze()
