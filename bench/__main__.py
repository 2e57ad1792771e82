"""Run every bench/bench_*.py in turn (or those named on the command line)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(names: list[str]) -> int:
    here = Path(__file__).parent
    found = pkgutil.iter_modules([str(here)])
    modules = sorted(m.name for m in found if m.name.startswith("bench_"))
    chosen = [m for m in modules if not names or m.removeprefix("bench_") in names]
    failed = 0
    for name in chosen:
        print(f"\n=== {name}", flush=True)
        failed += int(importlib.import_module(f"bench.{name}").main() != 0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
