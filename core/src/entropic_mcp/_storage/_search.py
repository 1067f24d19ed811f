"""An in-memory inverted index for ``search_delegations`` (completed delegations only).

Matching is literal and case-insensitive: every whitespace-separated query word must occur, as a
substring, in the summary or in the task. The index maps each word of the texts (``\\w+`` runs)
to the delegations containing it; a query word is looked up through the vocabulary terms that
contain its word runs, then every candidate is verified against the full text, so ``%``, ``_``
and regex characters never act as wildcards.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable

_WORD = re.compile(r"\w+")
#: Query-word → matching vocabulary terms, valid while the vocabulary is unchanged.
_CACHE_SIZE = 512


def fold(text: str) -> str:
    return text.casefold()


def query_words(query: str) -> list[str]:
    return list(dict.fromkeys(fold(query).split()))


class SearchIndex:
    """Word postings plus the folded texts of every completed delegation."""

    def __init__(self) -> None:
        self._postings: dict[str, set[str]] = {}
        # delegation id -> (folded summary, folded task, recency key)
        self._docs: dict[str, tuple[str, str, tuple[str, int]]] = {}
        self._term_cache: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def add(self, delegation_id: str, task: str, summary: str, recency: tuple[str, int]) -> None:
        folded_summary, folded_task = fold(summary), fold(task)
        self._docs[delegation_id] = (folded_summary, folded_task, recency)
        for term in set(_WORD.findall(folded_summary)) | set(_WORD.findall(folded_task)):
            ids = self._postings.get(term)
            if ids is None:
                self._postings[term] = {delegation_id}
                self._term_cache.clear()
            else:
                ids.add(delegation_id)

    def remove(self, delegation_id: str) -> None:
        entry = self._docs.pop(delegation_id, None)
        if entry is None:
            return
        for term in set(_WORD.findall(entry[0])) | set(_WORD.findall(entry[1])):
            ids = self._postings.get(term)
            if ids is not None:
                ids.discard(delegation_id)
                if not ids:
                    del self._postings[term]
                    self._term_cache.clear()

    def _terms_containing(self, run: str) -> list[str]:
        terms = self._term_cache.get(run)
        if terms is None:
            terms = [term for term in self._postings if run in term]
            if len(self._term_cache) >= _CACHE_SIZE:
                self._term_cache.clear()
            self._term_cache[run] = terms
        return terms

    def _candidates(self, words: Iterable[str]) -> set[str] | None:
        candidates: set[str] | None = None
        for word in words:
            for run in _WORD.findall(word):
                found: set[str] = set()
                for term in self._terms_containing(run):
                    found |= self._postings[term]
                candidates = found if candidates is None else candidates & found
                if not candidates:
                    return set()
        return candidates

    def search(self, words: list[str], max_results: int) -> list[str]:
        """Delegation ids, best first: most query words in the summary, then newest."""
        candidates = self._candidates(words)
        pool = self._docs if candidates is None else candidates
        scored = []
        docs = self._docs
        for delegation_id in pool:
            summary, task, recency = docs[delegation_id]
            score = 0
            for word in words:
                if word in summary:
                    score += 1
                elif word not in task:
                    break
            else:
                scored.append((score, recency, delegation_id))
        return [entry[2] for entry in heapq.nlargest(max_results, scored)]
