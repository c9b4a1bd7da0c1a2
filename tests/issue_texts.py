"""Synthetic GitHub-style issue texts about a fictional library, ``pondlib`` (a small data
pipeline package), written for the tests of :mod:`ragloom.retrieve.query.issue`.

Nothing here is copied from a real issue tracker: the library, its modules, the people and
the bugs are invented. The texts imitate the shapes real issues have: a title, template
headings, prose, fenced and indented code, doctest sessions, Python and pytest tracebacks,
quoted replies, expected / actual output and environment lists.
"""

from __future__ import annotations

__all__ = [
    "BUG_WITH_TRACEBACK",
    "DOCTEST_ISSUE",
    "FEATURE_REQUEST",
    "PYTEST_FAILURE",
    "QUOTED_REPLY",
    "long_issue",
]

BUG_WITH_TRACEBACK = """\
### `SchemaRegistry.resolve_field` raises KeyError for nested optional fields

**Describe the bug**

When a schema declares an optional field inside a nested record, `SchemaRegistry.resolve_field()`
fails with a `KeyError` instead of returning `None`. This started after upgrading from 0.8.2 to
0.9.0; the changelog mentions the new `FieldPath` parser in pondlib/core/paths.py, so I suspect
the lookup in `pondlib.core.schema` no longer handles the `?` suffix.

**To Reproduce**

```python
from pondlib.core.schema import SchemaRegistry, Record

registry = SchemaRegistry()
registry.register(Record("order", fields={"customer": Record("customer", optional=True)}))
registry.resolve_field("order.customer?.email")
```

**Traceback**

```
Traceback (most recent call last):
  File "/home/mira/src/shop/repro.py", line 5, in <module>
    registry.resolve_field("order.customer?.email")
  File "/home/mira/.venv/lib/python3.11/site-packages/pondlib/core/schema.py", line 214, in resolve_field
    node = self._walk(path.parts)
  File "/home/mira/.venv/lib/python3.11/site-packages/pondlib/core/schema.py", line 188, in _walk
    child = node.children[part]
KeyError: 'customer?'
```

**Expected behavior**

```
None
```

**Actual behavior**

```
KeyError: 'customer?'
```

**Environment**
- OS: Ubuntu 22.04
- Python: 3.11.4
- pondlib: 0.9.0
"""

PYTEST_FAILURE = """\
Flaky failure in test_merge_streams on Windows

Our CI started failing on the Windows runners only. The failing test is in
tests/test_streams.py and the assertion compares the merged batches:

    ___________________________ test_merge_streams ___________________________

        def test_merge_streams():
            left = Stream.from_rows(ROWS_A)
            right = Stream.from_rows(ROWS_B)
    >       assert merge_streams(left, right, key="ts").collect() == EXPECTED
    E       AssertionError: assert [Batch(ts=1), Batch(ts=3)] == [Batch(ts=1), Batch(ts=2), Batch(ts=3)]
    E         At index 1 diff: Batch(ts=3) != Batch(ts=2)

    tests/test_streams.py:88: AssertionError

I think `merge_streams` drops a batch when two timestamps compare equal after the
`normalize_clock()` call in pondlib/streams/merge.py.
"""

DOCTEST_ISSUE = """\
Window.rolling gives wrong mean for the first rows

The rolling mean ignores `min_periods`:

>>> from pondlib.window import Window
>>> Window([1, 2, 3, 4]).rolling(2, min_periods=1).mean()
[nan, 1.5, 2.5, 3.5]

Expected output:

    [1.0, 1.5, 2.5, 3.5]

The fix is probably in `Window._apply_rolling`, which computes the count before it checks
`min_periods`. Happy to open a PR.
"""

QUOTED_REPLY = """\
Re: configuration loader ignores environment overrides

> I set POND_CACHE_DIR but the loader still writes to ~/.cache/pondlib.
> Is this expected?

It is not expected. `load_config` reads the environment in `pondlib/config/loader.py`, but
`ConfigLoader.merge` runs afterwards and overwrites the value with the file default. We should
apply the environment last. The same thing happens with POND_WORKERS.

```toml
[cache]
dir = "/var/tmp/pond"
```
"""

FEATURE_REQUEST = """\
Feature request: allow custom serializers for Record

It would be useful to register a custom serializer per record type, similar to how
`register_codec` works for columns. Right now `Record.to_dict` is hard-coded to use the built-in
JSON encoder, so values such as Decimal or UUID fail with `TypeError: Object of type Decimal is
not JSON serializable`. A hook like `Record.serializer` or a `SerializerRegistry` would make
this pluggable without monkeypatching. I am happy to work on this if the maintainers agree
with the direction.
"""

_LOG_LINE = (
    "2024-03-02 10:15:{s:02d},{ms:03d} DEBUG pondlib.scheduler.pool worker-{w} picked task "
    "batch-{b} (queue depth {q})\n"
)


def long_issue(target_chars: int = 25_000) -> str:
    """An issue of about ``target_chars`` characters: the traceback issue, then a long pasted
    debug log and a long repro script, as real long issues are (mostly pasted output)."""
    parts = [BUG_WITH_TRACEBACK, "\n**Debug log**\n\n```\n"]
    n = 0
    while sum(map(len, parts)) < target_chars * 0.6:
        parts.append(_LOG_LINE.format(s=n % 60, ms=(n * 37) % 1000, w=n % 8, b=n, q=n % 13))
        n += 1
    parts.append("```\n\nFull reproduction script:\n\n```python\n")
    k = 0
    while sum(map(len, parts)) < target_chars - 200:
        parts.append(
            f"def step_{k}(registry):\n"
            f'    """Resolve field number {k} of the order schema."""\n'
            f'    return registry.resolve_field("order.line_{k}.amount")\n\n'
        )
        k += 1
    parts.append("```\n\nThanks for looking into this!\n")
    text = "".join(parts)
    return text + " " * max(0, target_chars - len(text))
