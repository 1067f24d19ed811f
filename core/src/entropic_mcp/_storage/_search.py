"""An in-memory inverted index for ``search_delegations`` (completed delegations only).

Matching is literal and case-insensitive: every whitespace-separated query word must occur, as a
substring, in the summary or in the task. The index maps each word of the texts (``\\w+`` runs)
to the delegations containing it, once for summary-or-task and once for the summary alone. A
query word made of word characters occurs in a text exactly when it is a substring of one of
the text's words, so its matches are the union of the postings of the vocabulary terms
containing it — no text is scanned. A query word with other characters (``50%``, ``foo.bar``)
narrows the candidates by its word runs, then each candidate is checked against the full text,
so ``%``, ``_`` and regex characters never act as wildcards.

Postings hold recency ranks, not ids: an int per delegation that grows with its recency key, so
"newest" is a comparison of ints and the ranks, kept in increasing order, walk newest first. The
common answer — enough delegations with every query word in the summary — comes from such a walk
that stops at ``max_results``; postings are intersected and counted (in C) only when a walk would
be longer, and the delegations without every word in the summary only when the first level falls
short.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import chain, islice

_WORD = re.compile(r"\w+")
#: Query runs whose matching vocabulary terms are remembered (kept current as terms arrive).
_CACHE_SIZE = 512
#: A run contained in more vocabulary terms than this (``a``, ``er``) is checked against the texts
#: instead: the union of that many postings costs more than scanning.
_BROAD = 256

Recency = tuple[str, int]


def fold(text: str) -> str:
    return text.casefold()


def query_words(query: str) -> list[str]:
    return list(dict.fromkeys(fold(query).split()))


def _intersection(sets: list[set[int]]) -> set[int]:
    # Smallest first: each step costs the smaller operand. A lone set is returned as it is (never
    # mutated by the caller), so a one-word query copies no postings.
    sets = sorted(sets, key=len)
    return sets[0] if len(sets) == 1 else sets[0].intersection(*sets[1:])


class SearchIndex:
    """Word postings plus the folded texts of every completed delegation."""

    def __init__(self) -> None:
        self._postings: dict[str, set[int]] = {}  # term -> ranks with it in the summary or the task
        self._in_summary: dict[str, set[int]] = {}  # term -> ranks with it in the summary
        # rank -> (id, folded summary, folded "summary\ntask", recency key), in rank order; a query
        # word never holds whitespace, so it cannot match across the joint
        self._docs: dict[int, tuple[str, str, str, Recency]] = {}
        self._rank: dict[str, int] = {}
        self._next_rank = 0
        self._newest: Recency | None = None
        self._term_cache: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def add(self, delegation_id: str, task: str, summary: str, recency: Recency) -> None:
        if delegation_id in self._rank:
            self.remove(delegation_id)
        rank = self._next_rank
        self._next_rank += 1
        folded_summary, folded_task = fold(summary), fold(task)
        self._docs[rank] = (delegation_id, folded_summary, f"{folded_summary}\n{folded_task}", recency)
        self._rank[delegation_id] = rank
        summary_terms = set(_WORD.findall(folded_summary))
        for term in summary_terms | set(_WORD.findall(folded_task)):
            ranks = self._postings.get(term)
            if ranks is None:
                self._postings[term] = {rank}
                for run, terms in self._term_cache.items():
                    if run in term:
                        terms.append(term)
            else:
                ranks.add(rank)
        for term in summary_terms:
            self._in_summary.setdefault(term, set()).add(rank)
        if self._newest is not None and recency < self._newest:
            self._renumber()  # completions arrive newest-last; a late older one is rare
        else:
            self._newest = recency

    def _renumber(self) -> None:
        ordered = sorted(self._docs.values(), key=lambda entry: entry[3])
        new_rank = {self._rank[entry[0]]: rank for rank, entry in enumerate(ordered)}
        self._docs = dict(enumerate(ordered))
        self._rank = {entry[0]: rank for rank, entry in enumerate(ordered)}
        self._next_rank = len(ordered)
        self._newest = ordered[-1][3] if ordered else None
        for postings in (self._postings, self._in_summary):
            for term, ranks in postings.items():
                postings[term] = {new_rank[rank] for rank in ranks}

    def remove(self, delegation_id: str) -> None:
        rank = self._rank.pop(delegation_id, None)
        if rank is None:
            return
        _, summary, text, _ = self._docs.pop(rank)
        for postings, folded in ((self._postings, text), (self._in_summary, summary)):
            for term in set(_WORD.findall(folded)):
                ranks = postings.get(term)
                if ranks is not None:
                    ranks.discard(rank)
                    if not ranks:
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

    def _union(self, terms: list[str], postings: dict[str, set[int]]) -> set[int]:
        empty: set[int] = set()
        if len(terms) == 1:
            return postings.get(terms[0], empty)  # the posting itself: callers never mutate it
        return empty.union(*(postings.get(term, empty) for term in terms))

    def _newest_first(self) -> Iterator[int]:
        return reversed(self._docs)  # ranks are inserted in increasing order

    def _newest_in_all(self, sets: list[set[int]], count: int) -> list[int]:
        """The ``count`` highest ranks that are in every one of ``sets``, highest first (all of
        them when fewer)."""
        sets = sorted(sets, key=len)
        smallest = sets[0]
        # Walking from the newest meets a member of a set holding a tenth of the index about every
        # tenth step, which for the usual few results is far shorter than intersecting thousands
        # of ranks. The walk gives up, for the intersection in C, once it has cost about as much.
        budget = len(smallest) // 4 + count
        found: list[int] = []
        for rank in islice(self._newest_first(), budget):
            for ranks in sets:
                if rank not in ranks:
                    break
            else:
                found.append(rank)
                if len(found) == count:
                    return found
        if budget >= len(self._docs):
            return found
        common = smallest.intersection(*sets[1:])
        return sorted(common, reverse=True) if len(common) <= count else heapq.nlargest(count, common)

    def search(self, words: list[str], max_results: int) -> list[str]:
        """Delegation ids, best first: most query words in the summary, then newest."""
        matches: list[set[int]] = []  # what each indexed word or word run matches
        in_summary: list[set[int]] = []  # per plain word the index answers: its summary matches
        checked: list[str] = []  # words verified against the texts
        for word in words:
            plain = _WORD.fullmatch(word) is not None
            answered = plain
            for run in [word] if plain else _WORD.findall(word):
                terms = self._terms_containing(run)
                if len(terms) > _BROAD:
                    answered = False
                    continue
                found = self._union(terms, self._postings)
                if not found:
                    return []
                matches.append(found)
                if plain:
                    in_summary.append(self._union(terms, self._in_summary))
            if not answered:
                checked.append(word)
        if checked:
            candidates = _intersection(matches) if matches else None
            return self._ids(self._scan(words, in_summary, checked, candidates, max_results))
        if not words:
            return self._ids(islice(self._newest_first(), max_results))
        # Every word in the summary is the best level; summary postings are subsets of the word's
        # matches, so it needs no candidates — they are only intersected when it holds too few.
        top = self._newest_in_all(in_summary, max_results)
        if len(top) < max_results:
            rest = _intersection(matches).difference(top)
            top.extend(self._ranked_below(rest, in_summary, max_results - len(top)))
        return self._ids(top)

    def _ranked_below(self, rest: set[int], in_summary: list[set[int]], count: int) -> list[int]:
        """The best ``count`` of ``rest`` (none with every word in the summary), best first."""
        sets = [ranks for ranks in in_summary if ranks]
        ceiling = min(len(sets), len(in_summary) - 1)  # the most summary words one of them can have
        # Newest first, as in _newest_in_all: done once ``count`` reach the ceiling, since anything
        # older ranks below them.
        levels: list[list[int]] = [[] for _ in range(ceiling + 1)]
        budget = len(rest) // 4 + count
        for rank in islice(self._newest_first(), budget):
            if rank in rest:
                score = 0
                for ranks in sets:
                    if rank in ranks:
                        score += 1
                levels[score].append(rank)
                if score == ceiling and len(levels[score]) == count:
                    return levels[score]
        if budget >= len(self._docs):
            return list(chain.from_iterable(reversed(levels)))[:count]
        counts = Counter(chain.from_iterable(ranks & rest for ranks in sets))
        # (score, rank) pairs compare in C; a dict of levels built in Python cost more
        found = [rank for _, rank in heapq.nlargest(count, zip(counts.values(), counts.keys(), strict=True))]
        if len(found) < count:
            found.extend(self._newest_in_all([rest.difference(counts)], count - len(found)))
        return found

    def _ids(self, ranks: Iterable[int]) -> list[str]:
        docs = self._docs
        return [docs[rank][0] for rank in ranks]

    def _scan(
        self,
        words: list[str],
        in_summary: list[set[int]],
        checked: list[str],
        candidates: set[int] | None,
        max_results: int,
    ) -> list[int]:
        """Check the texts, newest first, stopping once enough results have every word in the summary."""
        docs = self._docs
        order: Iterable[int]
        if candidates is not None and len(candidates) * 8 < len(docs):
            order = sorted(candidates, reverse=True)
        else:
            order = self._newest_first()
        best = len(words)
        levels: dict[int, list[int]] = {}
        for rank in order:
            if candidates is not None and rank not in candidates:
                continue
            _, summary, text, _ = docs[rank]
            score = 0
            for word in checked:
                if word not in text:
                    break
                if word in summary:
                    score += 1
            else:
                for ranks in in_summary:
                    if rank in ranks:
                        score += 1
                level = levels.setdefault(score, [])
                level.append(rank)
                if score == best and len(level) >= max_results:
                    break
        found: list[int] = []
        for score in sorted(levels, reverse=True):
            found.extend(levels[score][: max_results - len(found)])
        return found[:max_results]
