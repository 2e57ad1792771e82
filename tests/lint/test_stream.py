"""A long stream is read one document at a time: memory does not grow with the number of
documents (a 50 MB file of 278k documents once took 4 GB)."""

from __future__ import annotations

import argparse
import tracemalloc

from policies import yamlpos
from webhook.commands import lint
from webhook.inputs import sources

DOC = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\n"
       "data: {key: value-%d, other: padding-padding-padding-padding}\n---\n")


def _peak(count: int) -> int:
    raw = "".join(DOC % (i, i) for i in range(count)).encode()
    context, _ = sources.build_context(argparse.Namespace(
        policies=None, inventory=None, namespaces=[], exclude_namespace=None))
    tracemalloc.start()
    try:
        result = lint.Result()
        lint.lint_stream("big.yaml", yamlpos.iter_stream(raw), context, result)
        assert result.documents == count and result.findings == []
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_number_of_documents() -> None:
    small, large = _peak(500), _peak(5000)
    # the decoded text is the one thing that grows; the documents do not pile up
    assert large < small + 5000 * len(DOC) * 6
    assert large < 3 * small + 2_000_000
