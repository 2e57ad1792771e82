"""Kubernetes label-selector, node-selector and toleration matching. (stub: being written)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    raise NotImplementedError
