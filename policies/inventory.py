"""Node inventory. (stub: being written)"""

from __future__ import annotations


class Inventory:
    pass
