"""An in-memory inverted index for ``search_delegations`` (completed delegations only).

Matching is literal and case-insensitive: every whitespace-separated query word must occur, as a
substring, in the summary or in the task. The index maps each word of the texts (``\\w+`` runs)
to the delegations containing it, once for summary-or-task and once for the summary alone. A
query word made of word characters occurs in a text exactly when it is a substring of one of
the text's words, so its matches are the union of the postings of the vocabulary terms
containing it — no text is scanned. A query word with other characters (``50%``, ``foo.bar``)
narrows the candidates by its word runs, then each candidate is checked against the full text,
so ``%``, ``_`` and regex characters never act as wildcards.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from itertools import chain
from typing import Any

_WORD = re.compile(r"\w+")
#: Query runs whose matching vocabulary terms are remembered (kept current as terms arrive).
_CACHE_SIZE = 512
#: A run contained in more vocabulary terms than this (``a``, ``er``) is checked against the texts
#: instead: the union of that many postings costs more than scanning.
_BROAD = 256


def fold(text: str) -> str:
    return text.casefold()


def query_words(query: str) -> list[str]:
    return list(dict.fromkeys(fold(query).split()))


class SearchIndex:
    """Word postings plus the folded texts of every completed delegation."""

    def __init__(self) -> None:
        self._postings: dict[str, set[str]] = {}  # term -> ids with it in the summary or the task
        self._in_summary: dict[str, set[str]] = {}  # term -> ids with it in the summary
        # delegation id -> (folded summary, folded "summary\ntask", recency key); a query word never
        # holds whitespace, so it cannot match across the joint
        self._docs: dict[str, tuple[str, str, tuple[str, int]]] = {}
        self._term_cache: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def add(self, delegation_id: str, task: str, summary: str, recency: tuple[str, int]) -> None:
        folded_summary, folded_task = fold(summary), fold(task)
        self._docs[delegation_id] = (folded_summary, f"{folded_summary}\n{folded_task}", recency)
        summary_terms = set(_WORD.findall(folded_summary))
        for term in summary_terms | set(_WORD.findall(folded_task)):
            ids = self._postings.get(term)
            if ids is None:
                self._postings[term] = {delegation_id}
                for run, terms in self._term_cache.items():
                    if run in term:
                        terms.append(term)
            else:
                ids.add(delegation_id)
        for term in summary_terms:
            self._in_summary.setdefault(term, set()).add(delegation_id)

    def remove(self, delegation_id: str) -> None:
        entry = self._docs.pop(delegation_id, None)
        if entry is None:
            return
        for postings, text in ((self._postings, entry[1]), (self._in_summary, entry[0])):
            for term in set(_WORD.findall(text)):
                ids = postings.get(term)
                if ids is not None:
                    ids.discard(delegation_id)
                    if not ids:
                        del postings[term]
                        self._term_cache.clear()

    def _terms_containing(self, run: str) -> list[str]:
        terms = self._term_cache.get(run)
        if terms is None:
            terms = [term for term in self._postings if run in term]
            if len(self._term_cache) >= _CACHE_SIZE:
                self._term_cache.clear()
            self._term_cache[run] = terms
        return terms

    def _matching(self, run: str, postings: dict[str, set[str]]) -> set[str] | None:
        """Ids whose words contain ``run``; None when so many terms do that scanning texts is cheaper."""
        terms = self._terms_containing(run)
        if len(terms) > _BROAD:
            return None
        empty: set[str] = set()
        return empty.union(*(postings.get(term, empty) for term in terms))

    def search(self, words: list[str], max_results: int) -> list[str]:
        """Delegation ids, best first: most query words in the summary, then newest."""
        indexed: list[tuple[str, set[str]]] = []  # plain words the index answers, with their matches
        checked: list[str] = []  # words verified against the texts
        candidates: set[str] | None = None
        for word in words:
            runs = [word] if _WORD.fullmatch(word) else _WORD.findall(word)
            for run in runs:
                matches = self._matching(run, self._postings)
                if matches is None:
                    continue
                candidates = matches if candidates is None else candidates & matches
                if not candidates:
                    return []
            if runs == [word] and self._matching(word, self._postings) is not None:
                indexed.append((word, self._matching(word, self._in_summary) or set()))
            else:
                checked.append(word)
        docs = self._docs
        if checked:
            return self._scan(words, indexed, checked, candidates, max_results)
        pool: set[str] = set(docs) if candidates is None else candidates
        counts = Counter(chain.from_iterable(in_summary & pool for _, in_summary in indexed))
        levels: dict[int, list[str]] = {}
        for delegation_id, count in counts.items():
            levels.setdefault(count, []).append(delegation_id)
        found: list[str] = []
        for score in sorted(levels, reverse=True):
            found.extend(heapq.nlargest(max_results - len(found), levels[score], key=lambda d: docs[d][2]))
            if len(found) >= max_results:
                return found
        rest = (d for d in pool if d not in counts)  # no word in the summary: newest first
        found.extend(heapq.nlargest(max_results - len(found), rest, key=lambda d: docs[d][2]))
        return found

    def _scan(
        self,
        words: list[str],
        indexed: list[tuple[str, set[str]]],
        checked: list[str],
        candidates: set[str] | None,
        max_results: int,
    ) -> list[str]:
        """Check the texts, newest first, stopping once enough results have every word in the summary."""
        docs = self._docs
        if candidates is not None and len(candidates) * 8 < len(docs):
            order: Any = sorted(candidates, key=lambda d: docs[d][2], reverse=True)
        else:
            order = reversed(docs)  # completion order is insertion order
        best = len(words)
        levels: dict[int, list[str]] = {}
        for delegation_id in order:
            if candidates is not None and delegation_id not in candidates:
                continue
            summary, text, _ = docs[delegation_id]
            score = 0
            for word in checked:
                if word not in text:
                    break
                if word in summary:
                    score += 1
            else:
                for _, in_summary in indexed:
                    if delegation_id in in_summary:
                        score += 1
                level = levels.setdefault(score, [])
                level.append(delegation_id)
                if score == best and len(level) >= max_results:
                    break
        found: list[str] = []
        for score in sorted(levels, reverse=True):
            found.extend(levels[score][: max_results - len(found)])
        return found[:max_results]
