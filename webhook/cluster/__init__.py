"""cluster: see webhook/__init__.py for the layout.

Every module here that talks to a cluster imports parts of the `kubernetes` package, whose
own __init__ imports all of it first: the dynamic client, websockets (stream), leader
election, informers (some 35 ms, none of it used here). When it is imported, the package is
entered without running that file; its submodules (config, client, watch…) import as usual
when asked for. Nothing is imported until then: commands that read only files never load
the client (tests/cli/test_no_cluster_client.py).
"""

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_PACKAGE = "kubernetes"


class _WithoutInit(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the `kubernetes` package where it is installed, and loads it without its
    __init__ (only that package: its submodules are found and loaded as usual)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None:
            return None  # not installed: the import that needs it says so
        spec.loader = self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return None  # the usual module object, with the package's __path__

    def exec_module(self, module: ModuleType) -> None:
        pass  # the package's __init__ is not run


if _PACKAGE not in sys.modules and not any(isinstance(f, _WithoutInit) for f in sys.meta_path):
    sys.meta_path.insert(0, _WithoutInit())
