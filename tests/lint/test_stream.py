"""A long stream is read one document at a time: memory does not grow with the number of
documents (a 50 MB file of 278k documents once took 4 GB)."""

from __future__ import annotations

import argparse
import tracemalloc

import yaml

from policies import yamlpos
from webhook.commands import lint
from webhook.inputs import sources

DOC = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\n"
       "data: {key: value-%d, other: padding-padding-padding-padding}\n---\n")


def _peak(count: int) -> int:
    raw = "".join(DOC % (i, i) for i in range(count)).encode()
    context, _ = sources.build_context(argparse.Namespace(
        policies=None, inventory=None, namespaces=[], exclude_namespace=None))
    # The scalar resolver's cache is process-wide: start every measure from an empty one, so
    # the figure does not depend on which tests ran before (a full cache hides its own growth).
    yamlpos._resolve.cache_clear()
    tracemalloc.start()
    try:
        result = lint.Result()
        lint.lint_stream("big.yaml", yamlpos.iter_stream(raw), context, result)
        assert result.documents == count and result.findings == []
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _full_cache() -> int:
    """What the resolver's cache costs when full: bounded by its maxsize, whatever the stream."""
    yamlpos._resolve.cache_clear()
    tracemalloc.start()
    try:
        maxsize = yamlpos._resolve.cache_info().maxsize or 0
        for i in range(maxsize):
            yamlpos._resolve(yaml.ScalarNode, f"value-{i}", (True, False))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        yamlpos._resolve.cache_clear()


def test_memory_does_not_grow_with_the_number_of_documents() -> None:
    small, large = _peak(500), _peak(5000)
    # the decoded text is the one thing that grows; the documents do not pile up. The 5000
    # documents' 10000 distinct names fill the scalar cache, a bounded cost counted apart.
    cache = _full_cache()
    assert large < small + 5000 * len(DOC) * 6 + cache
    assert large < 3 * small + 2_000_000 + cache


def test_the_measure_does_not_depend_on_what_ran_before() -> None:
    cold = _peak(500)
    for i in range(20_000):  # what a corpus run leaves behind: a cache full of other scalars
        yamlpos._resolve(yaml.ScalarNode, f"other-{i}", (True, False))
    assert _peak(500) < cold * 1.2
