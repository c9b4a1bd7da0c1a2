"""A read scope is the current thread's and the current block's only."""

from __future__ import annotations

import threading

from ragloom.index.readscope import memo, read_scope


def test_memo_lives_for_the_scope_and_nests_into_the_outer_one() -> None:
    assert memo("k") is None
    with read_scope():
        first = memo("k")
        assert first == {}
        assert first is not None
        first["v"] = 1
        with read_scope():  # a nested scope shares the outer one
            assert memo("k") == {"v": 1}
        assert memo("other") == {}
    assert memo("k") is None
    with read_scope():  # a new scope starts empty
        assert memo("k") == {}


def test_another_thread_does_not_see_the_scope() -> None:
    seen: list[object] = []
    with read_scope():
        box = memo("k")
        assert box is not None
        box["v"] = 1
        t = threading.Thread(target=lambda: seen.append(memo("k")))
        t.start()
        t.join()
    assert seen == [None]
