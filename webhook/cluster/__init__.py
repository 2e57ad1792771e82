"""cluster: see webhook/__init__.py for the layout.

Every module here that talks to a cluster imports parts of the `kubernetes` package, whose
own __init__ imports all of it first: the dynamic client, websockets (stream), leader
election, informers (some 35 ms, none of it used here). The package is entered without
running that file; its submodules (config, client, watch…) import as usual when asked for.
"""

import importlib.util
import sys


def _enter_kubernetes_lightly() -> None:
    if "kubernetes" in sys.modules:
        return
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or spec.submodule_search_locations is None:
        return  # not installed: the import that needs it says so
    sys.modules["kubernetes"] = importlib.util.module_from_spec(spec)


_enter_kubernetes_lightly()
