"""docs/benchmarks.md's tables come from bench/results/*.toml (scripts/gen_benchmarks.py)."""

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_benchmarks.py"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_benchmarks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_benchmarks"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("gen_benchmarks", None)


def write(path: Path, *rows: dict[str, str]) -> None:
    text = []
    for row in rows:
        text.append("[[row]]")
        text.extend(f'{k} = "{v}"' for k, v in row.items())
        text.append("")
    path.write_text("\n".join(text), encoding="utf-8")


def test_the_committed_page_is_current_against_the_results_files(gen):
    page = gen.PAGE.read_text(encoding="utf-8")
    assert gen.regenerate(page, gen.load_rows()) == page, "run python scripts/gen_benchmarks.py"


def test_every_committed_row_carries_a_date(gen):
    for rows in gen.load_rows().values():
        for row in rows:
            assert row["date"][:4].isdigit(), row


def test_rows_are_ordered_by_their_target_and_carry_date_load_and_tools(gen, tmp_path):
    write(tmp_path / "b.toml", {"id": "P10", "what": "glob", "date": "2026-12-01", "load": "1.8 on 2 cores"})
    write(
        tmp_path / "a.toml",
        {"id": "P4", "what": "tools", "date": "2026-12-02", "tools": "45", "ratio": "1|2"},
        {"id": "P9", "what": "kept with its file", "date": "2026-12-02"},
    )
    write(tmp_path / "c.toml", {"id": "—", "order": "9.5", "what": "read", "date": "2026-11-30"})
    tables = gen.load_rows(tmp_path)
    assert [r["what"] for r in tables["main"]] == ["tools", "kept with its file", "read", "glob"]
    page = "intro\n<!-- rows:main -->\nold\n<!-- /rows:main -->\nprose\n"
    out = gen.regenerate(page, tables)
    assert out.startswith("intro\n<!-- rows:main -->\n| # | what |")
    assert out.endswith("<!-- /rows:main -->\nprose\n")
    assert "old" not in out
    assert "| 2026-12-02, 45 tools |" in out
    assert "| 2026-12-01, load 1.8 on 2 cores |" in out
    assert "1\\|2" in out  # a pipe in a cell does not split the row


def test_a_row_without_a_date_is_refused_naming_the_file(gen, tmp_path):
    write(tmp_path / "x.toml", {"id": "P1", "what": "no date"})
    with pytest.raises(gen.ResultsError, match=r"x\.toml: row 1 has no date"):
        gen.load_rows(tmp_path)


def test_rows_for_a_table_the_page_lacks_are_refused(gen, tmp_path):
    write(tmp_path / "x.toml", {"table": "storage", "id": "P15", "what": "w", "date": "2026-12-01"})
    with pytest.raises(gen.ResultsError, match="storage"):
        gen.regenerate("<!-- rows:main -->\n<!-- /rows:main -->\n", gen.load_rows(tmp_path))


def test_check_mode_says_the_page_is_stale_and_a_run_makes_it_current(gen, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    results.mkdir()
    write(results / "x.toml", {"id": "P1", "what": "new row", "date": "2026-12-01"})
    page = tmp_path / "benchmarks.md"
    page.write_text("<!-- rows:main -->\n<!-- /rows:main -->\n", encoding="utf-8")
    monkeypatch.setattr(gen, "RESULTS", results)
    monkeypatch.setattr(gen, "PAGE", page)
    assert gen.main(["--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert gen.main([]) == 0
    assert "| P1 | new row |" in page.read_text(encoding="utf-8")
    assert gen.main(["--check"]) == 0
    (results / "bad.toml").write_text("[[row]]\nid = 'P2'\n", encoding="utf-8")
    assert gen.main(["--check"]) == 2
    assert "bad.toml: row 1 has no what, date" in capsys.readouterr().err
