"""The one owner of the caches: bounded, least recently used out first, thread-safe,
counted, sized by name; compiled forms kept on their parsers."""

from __future__ import annotations

import threading

import pytest

from autoparser import CACHES, AutoparserError, Caches, ChatTemplate, Store
from autoparser.peg import end, literal
from autoparser.peg.oneshot import compiled


def test_a_store_is_bounded_and_drops_the_least_recently_used() -> None:
    store: Store[int] = Store("t", 2)
    store.put("a", 1)
    store.put("b", 2)
    assert store.get("a") == 1  # "a" is now the most recently used
    store.put("c", 3)
    assert store.get("b") is None
    assert (store.get("a"), store.get("c")) == (1, 3)
    stats = store.stats()
    assert (stats.entries, stats.size, stats.hits, stats.misses) == (2, 2, 3, 1)


def test_an_owner_that_is_not_the_same_object_is_a_miss() -> None:
    store: Store[str] = Store("t", 4)
    first, second = object(), object()
    store.put(1, "built for first", owner=first)
    assert store.get(1, owner=first) == "built for first"
    assert store.get(1, owner=second) is None


def test_a_build_that_raises_stores_nothing() -> None:
    store: Store[int] = Store("t", 4)

    def fail() -> int:
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        store.get_or_build("k", fail)
    assert store.stats().entries == 0
    assert store.get_or_build("k", lambda: 5) == 5


def test_concurrent_builds_keep_the_bound_and_count_every_lookup() -> None:
    store: Store[int] = Store("t", 8)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(300):
                assert store.get_or_build((offset + i) % 20, lambda i=i: i) is not None
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = store.stats()
    assert stats.entries <= 8
    assert stats.hits + stats.misses == 6 * 300


def test_caches_are_sized_read_and_cleared_by_name() -> None:
    caches = Caches()
    store: Store[int] = caches.store("x", 4)
    assert caches.store("x", 99) is store
    for i in range(4):
        store.put(i, i)
    caches.configure(x=2)
    assert caches.stats()["x"].entries == 2
    with pytest.raises(AutoparserError, match="'nope'"):
        caches.configure(nope=1)
    caches.clear()
    assert caches.stats()["x"].entries == 0


def test_the_library_keeps_its_template_caches_in_the_one_owner() -> None:
    template = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}|cache test")
    before = CACHES.stats()["analysis"]
    template.analyze()
    ChatTemplate(template.source).analyze()
    after = CACHES.stats()["analysis"]
    assert after.hits > before.hits
    assert {"analysis", "verification", "compile", "probe", "caps"} <= set(CACHES.stats())
    assert {"request_contexts", "request_builds"} <= set(CACHES.stats())


def test_a_one_shot_form_lives_on_its_parser() -> None:
    parser = literal("a") + end()
    assert compiled(parser) is compiled(parser)
    assert compiled(literal("a") + end()) is not compiled(parser)
