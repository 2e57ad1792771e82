"""The pure core of gpupolicy: one review() decides for the webhook, the linter and the audit.

No I/O, no Flask, no Kubernetes client, no printing here: the edges live in `webhook/`.

Records are NamedTuples where they can be (immutable, hashable, compared by value, copied
with `_replace`): every command creates its classes at start, and on Python 3.11 a frozen
dataclass execs six generated functions (about 0.5 ms a class) where a NamedTuple costs about
0.1 ms. A dataclass stays where a record needs a fresh mutable default (`default_factory`),
`__post_init__`, a field named like a tuple method (`count`, `index`), or mutation; give it a
docstring, or dataclass() makes one from inspect.signature (~0.07 ms a class).
"""
