"""GPU catalog. (stub: being written)"""

from __future__ import annotations


class Catalog:
    pass
