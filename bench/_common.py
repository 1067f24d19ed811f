"""Shared helpers for the benchmarks: timing, peer environments, the results table."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
PEER_VENVS = Path(os.environ.get("ENTROPIC_MCP_BENCH_VENVS", "/tmp/entropic-mcp-bench-venvs"))


def median_us(run: Callable[[], object], *, repeat: int = 7, number: int = 2000) -> float:
    """Median over ``repeat`` rounds of the mean time of ``number`` calls, in microseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            run()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def peer_python(name: str, requirement: str) -> str | None:
    """A Python in a separate venv holding ``requirement`` (e.g. the 1.x SDK), made once and reused."""
    venv = PEER_VENVS / name
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        result = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", requirement], capture_output=True, text=True
        )
        if result.returncode != 0:
            print(f"  (could not install {requirement} for the peer: {result.stderr.strip()[-200:]})")
            return None
    return str(python)


def report(name: str, rows: list[tuple[str, str, str, str, str]]) -> None:
    """Print and save a table: (what, ours, peer, ratio, target)."""
    header = ("what", "entropic-mcp", "peer / floor", "ratio", "target")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *rows]]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    text = "\n".join(lines)
    print(f"\n{name}\n{text}\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.txt").write_text(text + "\n", encoding="utf-8")


def source_file(rng: random.Random, lines: int, words: tuple[str, ...]) -> str:
    """Python-like source: functions, docstrings, assignments with comments (~55 bytes a line)."""
    out = []
    for i in range(lines):
        a, b, c = rng.choice(words), rng.choice(words), rng.choice(words)
        if i % 12 == 0:
            out.append(f"def {a}_{b}_{i}({c}, {b}=None):")
        elif i % 12 == 1:
            out.append(f'    """Compute the {a} of {b} from {c}."""')
        else:
            out.append(f"    {a}_{i % 7} = {b}.{c}({a}, {i}) + len({c}_{b})  # {a} {b}")
    return "\n".join(out) + "\n"


# -- rows for docs/benchmarks.md --------------------------------------------------------------
#
# A benchmark that measures a row of docs/benchmarks.md records it with ``record``: the rows go
# to bench/results/<name>.toml (committed), which scripts/gen_benchmarks.py turns into the page's
# tables. One file per benchmark (or per hand-kept topic); a new run replaces its own file.

ROW_KEYS = ("id", "order", "what", "peer", "ours", "ratio", "target", "met", "date", "load", "tools", "notes")


def load_average() -> str:
    """The 1-minute load average and the number of cores, e.g. ``1.8 on 2 cores``."""
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def load_span(loads: list[float]) -> str:
    """The lowest and highest 1-minute load average sampled during a run, e.g. ``1.4–1.9 on 2 cores``."""
    return f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores"


def verdict(ok: bool, loads: list[float]) -> str:
    """``yes`` or ``**no**``; past twice as much load as cores, also that a quiet machine might
    say otherwise (wall times stretch there, and not alike on both sides)."""
    text = "yes" if ok else "**no**"
    busiest = max(loads)
    if busiest > 2 * (os.cpu_count() or 1):
        text += f", at load {busiest:.0f} (not shown on a quiet machine)"
    return text


def stamp_load(rows: list[dict[str, object]], loads: list[float]) -> None:
    """Give every row the run's load span and turn a ``met`` given as a bool into its verdict."""
    for row in rows:
        row["load"] = load_span(loads)
        if isinstance(row.get("met"), bool):
            row["met"] = verdict(bool(row["met"]), loads)


def ratio_spread(ratios: list[float]) -> str:
    """``median× (min–max×)`` of per-round ratios, the form the rows give a ratio in."""
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)"


def tree_commit() -> str:
    """The commit the benchmarked tree is at (short hash), for a results file's header; "" outside git."""
    done = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def today() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())


def _toml_string(value: object) -> str:
    import json

    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML basic string


def record(name: str, rows: list[dict[str, object]], *, table: str = "main", script: str = "") -> Path:
    """Write ``rows`` (dicts with ROW_KEYS; date and load default to now) to bench/results/<name>.toml."""
    lines = [f"# Written by {script or name}; regenerate docs/benchmarks.md with scripts/gen_benchmarks.py.", ""]
    for row in rows:
        full = {"table": table, "date": today(), "load": load_average(), **row}
        unknown = set(full) - {"table", *ROW_KEYS}
        if unknown:
            raise ValueError(f"unknown row keys {sorted(unknown)}; use {ROW_KEYS}")
        lines.append("[[row]]")
        lines.extend(f"{key} = {_toml_string(value)}" for key, value in full.items() if value not in (None, ""))
        lines.append("")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def interleaved(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """ABAB rounds: each round runs every side once, in an order that alternates between rounds."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            samples[name].append(sides[name]())
    return samples


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """``median (min–max)``."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


async def http_exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[float, bool]:
    """Send one HTTP/1.1 request on a keep-alive connection and read its whole response (by
    Content-Length or chunked): (seconds it took, whether the call failed: not 200, or an MCP
    result with ``"isError":true``). The lean load generators' one response reader."""
    started = time.perf_counter()
    writer.write(request)
    status = await reader.readline()
    length, chunked = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "transfer-encoding" and "chunked" in value:
            chunked = True
    if chunked:
        data = b""
        while size := int((await reader.readline()).strip(), 16):
            data += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    else:
        data = await reader.readexactly(length)
    return time.perf_counter() - started, b" 200 " not in status or b'"isError":true' in data
