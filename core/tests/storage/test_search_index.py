"""The tinydb backend's search: literal substrings, case folding, ranking, index upkeep."""

from __future__ import annotations

import random

import pytest
from entropic_mcp._storage import _search
from entropic_mcp._storage._search import SearchIndex, query_words
from hypothesis import given, settings
from hypothesis import strategies as st


def _index(*docs: tuple[str, str, str]) -> SearchIndex:
    index = SearchIndex()
    for order, (delegation_id, task, summary) in enumerate(docs):
        index.add(delegation_id, task, summary, ("2026-01-01", order))
    return index


def test_query_words_are_folded_and_deduplicated() -> None:
    assert query_words("  Auth AUTH  Straße ") == ["auth", "strasse"]


def test_words_match_as_substrings_like_the_original_like_query() -> None:
    index = _index(("a", "authentication flow", "done"), ("b", "authorise", "done"))
    assert sorted(index.search(["auth"], 5)) == ["a", "b"]
    assert index.search(["thenti"], 5) == ["a"]


def test_unicode_is_folded_on_both_sides() -> None:
    index = _index(("a", "STRASSE reparieren", "ÉTÉ fini"))
    assert index.search(query_words("straße été"), 5) == ["a"]


def test_a_query_word_of_punctuation_only_is_checked_literally() -> None:
    index = _index(("a", "cost is 5%", "ok"), ("b", "cost is 5", "ok"))
    assert index.search(["%"], 5) == ["a"]
    assert index.search(["5%"], 5) == ["a"]


def test_a_word_split_by_punctuation_must_still_occur_whole() -> None:
    index = _index(("a", "call foo.bar()", "ok"), ("b", "foo and bar", "ok"))
    assert index.search(["foo.bar"], 5) == ["a"]


def test_removed_delegations_are_forgotten() -> None:
    index = _index(("a", "alpha", "x"), ("b", "alpha beta", "y"))
    index.remove("a")
    assert index.search(["alpha"], 5) == ["b"]
    index.remove("b")
    assert index.search(["alpha"], 5) == []
    assert len(index) == 0


def test_new_terms_are_found_after_a_cached_lookup() -> None:
    index = _index(("a", "gamma", "x"))
    assert index.search(["gam"], 5) == ["a"]
    index.add("b", "gamut", "y", ("2026-01-02", 9))
    assert index.search(["gam"], 5) == ["b", "a"]


def _reference(docs: list[tuple[str, str, str]], words: list[str], max_results: int) -> list[str]:
    ranked = []
    for order, (delegation_id, task, summary) in enumerate(docs):
        task, summary = task.casefold(), summary.casefold()
        if all(w in summary or w in task for w in words):
            ranked.append((sum(w in summary for w in words), order, delegation_id))
    ranked.sort(reverse=True)
    return [entry[2] for entry in ranked[:max_results]]


@pytest.mark.parametrize("broad", [256, 2], ids=["index", "scan"])
def test_search_agrees_with_brute_force_on_random_texts(monkeypatch: pytest.MonkeyPatch, broad: int) -> None:
    # broad=2 forces nearly every query word down the text-scanning path.
    monkeypatch.setattr(_search, "_BROAD", broad)
    rng = random.Random(5)
    alphabet = ["ab", "ba", "abc", "c", "x%", "a_b", "b.c", "Ab", "zz"]
    docs = [(f"d{i}", " ".join(rng.choices(alphabet, k=4)), " ".join(rng.choices(alphabet, k=3))) for i in range(150)]
    index = _index(*docs)
    for _ in range(300):
        words = query_words(" ".join(rng.choices([*alphabet, "a", "b", "%", "_", "."], k=rng.choice([1, 2, 3]))))
        max_results = rng.choice([1, 3, 10])
        assert index.search(words, max_results) == _reference(docs, words, max_results), words


def test_a_late_older_completion_ranks_by_its_recency_not_its_arrival() -> None:
    index = SearchIndex()
    index.add("new", "fix a.b", "a.b done", ("2026-01-02", 2))
    index.add("old", "fix a.b", "a.b done", ("2026-01-01", 1))
    assert index.search(["a.b"], 1) == ["new"]  # checked against the texts, newest first
    assert index.search(["fix", "done"], 5) == ["new", "old"]
    index.add("newest", "fix a.b", "x", ("2026-01-03", 3))
    assert index.search(["fix"], 5) == ["newest", "new", "old"]
    assert index.search(["a.b"], 5) == ["new", "old", "newest"]


def test_adding_a_delegation_again_replaces_its_texts() -> None:
    index = _index(("a", "alpha", "x"), ("b", "alpha", "y"))
    index.add("a", "beta", "z", ("2026-01-01", 0))
    assert index.search(["alpha"], 5) == ["b"]
    assert index.search(["beta"], 5) == ["a"]
    assert len(index) == 2


_ALPHABET = ["ab", "ba", "abc", "c", "x%", "a_b", "b.c", "Ab", "zz", "ÉTÉ", "straße", "q"]
_texts = st.lists(st.sampled_from(_ALPHABET), max_size=5).map(" ".join)
_query_word = st.sampled_from([*_ALPHABET, "a", "b", "%", "_", ".", "été", "STRASSE", "zzz", "b c"])


@settings(max_examples=200, deadline=None)
@given(
    corpus=st.lists(
        st.tuples(_texts, _texts, st.sampled_from(["2026-01-01", "2026-01-02", "2026-01-03"])), max_size=40
    ),
    arrival=st.randoms(use_true_random=False),
    removed=st.sets(st.integers(0, 39), max_size=8),
    queries=st.lists(st.tuples(st.lists(_query_word, max_size=4), st.sampled_from([1, 2, 3, 10])), max_size=8),
    broad=st.sampled_from([256, 3, 1]),
)
def test_search_agrees_with_a_naive_scan(
    corpus: list[tuple[str, str, str]],
    arrival: random.Random,
    removed: set[int],
    queries: list[tuple[list[str], int]],
    broad: int,
) -> None:
    # Completion stamps tie across delegations (the counter breaks the tie, as in the backend), and
    # the delegations arrive in any order, so the index cannot take arrival for recency.
    docs = {f"d{i}": (task, summary, (stamp, i)) for i, (task, summary, stamp) in enumerate(corpus)}
    index = SearchIndex()
    for delegation_id in arrival.sample(sorted(docs), len(docs)):
        task, summary, recency = docs[delegation_id]
        index.add(delegation_id, task, summary, recency)
    for i in removed:
        index.remove(f"d{i}")
        docs.pop(f"d{i}", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search, "_BROAD", broad)
        for query, max_results in queries:
            words = query_words(" ".join(query))
            ranked = []
            for delegation_id, (task, summary, recency) in docs.items():
                task, summary = task.casefold(), summary.casefold()
                if all(w in summary or w in task for w in words):
                    ranked.append((sum(w in summary for w in words), recency, delegation_id))
            ranked.sort(reverse=True)
            expected = [entry[2] for entry in ranked[:max_results]]
            assert index.search(words, max_results) == expected, words
