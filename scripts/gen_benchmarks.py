"""Regenerate the tables of docs/benchmarks.md from bench/results/*.toml.

    python scripts/gen_benchmarks.py           # rewrite the tables in place
    python scripts/gen_benchmarks.py --check   # exit 1 (saying which table) if the page is stale

Every row of a generated table comes from a results file, with the date it was measured, the
load it was measured at and the number of tools it covered, so no row can go stale silently.
A benchmark writes its own file (``bench/_common.py``'s ``record``; a new run replaces the
file); figures measured some other way are kept in a results file of their own, edited by hand
in the same format (one ``[[row]]`` per row; see bench/README.md).

A table lives in the page between ``<!-- rows:NAME -->`` and ``<!-- /rows:NAME -->``; it holds
the rows whose ``table`` is NAME (default ``main``). Within a table, files are ordered by the
``order`` of their first row, else by the number of its target (P1 … P18; neither: last), and
rows within a file keep their order. The prose around the tables is not touched.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
REQUIRED = ("id", "what", "date")
COLUMNS = ("#", "what", "peer / floor", "ours", "ratio", "target", "met", "measured")
BLOCK = re.compile(r"(<!-- rows:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /rows:(?P=name) -->)", re.S)


class ResultsError(Exception):
    """A results file that cannot be used: what is wrong and where."""


def _number(row_id: str) -> float:
    found = re.match(r"P(\d+)", row_id)
    return float(found.group(1)) if found else float("inf")


def load_rows(results: Path | None = None) -> dict[str, list[dict[str, str]]]:
    """Rows by table, ordered as the page shows them (from ``results``, default bench/results)."""
    results = RESULTS if results is None else results
    files: list[tuple[float, str, list[dict[str, str]]]] = []
    for path in sorted(results.glob("*.toml")):
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ResultsError(f"{path}: not readable TOML ({exc}); fix or remove the file") from exc
        rows = data.get("row", [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ResultsError(f"{path}: expected [[row]] tables")
        for index, row in enumerate(rows, 1):
            missing = [key for key in REQUIRED if not str(row.get(key, "")).strip()]
            if missing:
                raise ResultsError(f"{path}: row {index} has no {', '.join(missing)} (every row needs {REQUIRED})")
        if rows:
            clean = [{key: str(value) for key, value in row.items()} for row in rows]
            first = clean[0]
            try:
                place = float(first["order"]) if "order" in first else _number(first["id"])
            except ValueError as exc:
                raise ResultsError(f"{path}: row 1 has order {first['order']!r}; give a number such as 10.5") from exc
            files.append((place, path.name, clean))
    tables: dict[str, list[dict[str, str]]] = {}
    for _, _, rows in sorted(files, key=lambda f: (f[0], f[1])):
        for row in rows:
            tables.setdefault(row.get("table", "main"), []).append(row)
    return tables


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def measured(row: dict[str, str]) -> str:
    parts = [row["date"]]
    if row.get("load"):
        parts.append(f"load {row['load']}")
    if row.get("tools"):
        parts.append(f"{row['tools']} tools")
    return ", ".join(parts)


def render(rows: list[dict[str, str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        what = row["what"] + (f" ({row['notes']})" if row.get("notes") else "")
        cells = [
            row["id"],
            what,
            row.get("peer", ""),
            row.get("ours", ""),
            row.get("ratio", ""),
            row.get("target", "—"),
            row.get("met", "—"),
            measured(row),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def regenerate(page: str, tables: dict[str, list[dict[str, str]]]) -> str:
    names = [m.group("name") for m in BLOCK.finditer(page)]
    unplaced = sorted(set(tables) - set(names))
    if unplaced:
        raise ResultsError(
            f"rows for table(s) {', '.join(unplaced)} but docs/benchmarks.md has no "
            f"<!-- rows:NAME --> block for them; add one or fix the rows' table"
        )

    def fill(match: re.Match[str]) -> str:
        return match.group(1) + render(tables.get(match.group("name"), [])) + match.group(4)

    return BLOCK.sub(fill, page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the page is current")
    args = parser.parse_args(argv)
    try:
        page = PAGE.read_text(encoding="utf-8")
        new = regenerate(page, load_rows())
    except (OSError, ResultsError) as exc:
        print(f"gen_benchmarks: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if new != page:
            print(
                "gen_benchmarks: docs/benchmarks.md is stale against bench/results/; "
                "run python scripts/gen_benchmarks.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != page:
        PAGE.write_text(new, encoding="utf-8")
        print(f"gen_benchmarks: {PAGE} regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
