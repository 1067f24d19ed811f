"""The tinydb backend's search: literal substrings, case folding, ranking, index upkeep."""

from __future__ import annotations

import random

import pytest
from entropic_mcp._storage import _search
from entropic_mcp._storage._search import SearchIndex, query_words


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
