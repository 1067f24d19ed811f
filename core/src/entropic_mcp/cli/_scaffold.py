"""``entropic-mcp new-plugin NAME``: a working, tested plugin made from ``plugins/_template``.

The template ships inside the wheel as ``entropic_mcp/_template`` (a build hook copies it there);
in a source checkout it is read from ``plugins/_template`` directly. Every ``template`` name in
it becomes the new plugin's, and the ``TEMPLATE:`` notes (which tell a copier what to rename)
are dropped, since the renaming is done.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
FIRST_PARTY = ("filesystem", "bash", "git", "entropic")
#: Files of the template that are not copied: the template's own README (it explains copying),
#: its LICENSE (the new plugin's licence is its author's choice) and build leftovers.
SKIPPED = {"README.md", "LICENSE"}
_NOTE = re.compile(r"[ \t]*#[ \t]*TEMPLATE:[^\n]*|[ \t]*\(TEMPLATE:[^)]*\)")


def template_dir() -> Path:
    """Where the template is: packaged with the core, or in the source checkout."""
    import entropic_mcp

    package = Path(entropic_mcp.__file__).parent
    for candidate in (package / "_template", package.parents[2] / "plugins" / "_template"):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    raise click.ClickException(
        "the plugin template is not installed with entropic-mcp (expected entropic_mcp/_template); "
        "reinstall entropic-mcp, or copy plugins/_template from the source repository"
    )


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _render(text: str, name: str) -> str:
    text = _NOTE.sub("", text)
    for old, new in (
        ("entropic_mcp_template", f"entropic_mcp_{name}"),
        ("entropic-mcp-template", f"entropic-mcp-{name}"),
        ("TemplateServer", f"{_camel(name)}Server"),
        ("template.word_count", f"{name}.word_count"),
        ('name = "template"', f'name = "{name}"'),
        ("template = ", f"{name} = "),
        ("test_template", f"test_{name}"),
        ("A one-tool entropic-mcp plugin to copy when writing your own", f"The {name} plugin for entropic-mcp"),
        ("A one-tool entropic-mcp plugin to copy", f"The {name} plugin for entropic-mcp"),
    ):
        text = text.replace(old, new)
    return text


def _readme(name: str) -> str:
    return f"""# entropic-mcp-{name}

An [entropic-mcp](https://pypi.org/project/entropic-mcp/) plugin serving `{name}.word_count`.

    pip install -e ".[test]"
    pytest                                   # the plugin's tests, with the entropic-mcp kit
    entropic-mcp plugins                     # the plugin is discovered
    entropic-mcp check-plugin {name}         # the kit's conformance checks as a report
    entropic-mcp call {name}.word_count '{{"text": "one two"}}' --yes

Add a tool: describe it in `src/entropic_mcp_{name}/tools/<tool>.json`, write a `ToolBase`
subclass, and `register_tool` it in the server's `__init__`. See the entropic-mcp plugin-author
guide (docs/plugin-authors.md).
"""


def scaffold(name: str, parent: Path) -> Path:
    """Write the plugin ``entropic-mcp-<name>`` under ``parent``; return its directory."""
    if not NAME.match(name):
        raise click.UsageError(
            f"plugin name {name!r} is not usable: lower-case letters, digits and '_', starting with a "
            "letter, at most 40 characters (it is the server name, the tool prefix and part of the "
            "package name), e.g. 'weather' or 'issue_tracker'"
        )
    if name in FIRST_PARTY or name == "template":
        raise click.UsageError(f"{name!r} is the name of a first-party plugin; pick another name")
    target = parent / f"entropic-mcp-{name}"
    if target.exists():
        raise click.UsageError(f"{target} already exists; pick another name or directory (--dir)")
    source = template_dir()
    files = [
        path
        for path in sorted(source.rglob("*"))
        if path.is_file()
        and path.relative_to(source).as_posix() not in SKIPPED
        and not any(part == "__pycache__" or part.endswith(".egg-info") for part in path.relative_to(source).parts)
    ]
    for path in files:
        relative = Path(_render(path.relative_to(source).as_posix(), name))
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".py", ".toml", ".json", ".md", ".txt", ".cfg"):
            destination.write_text(_render(path.read_text("utf-8"), name), "utf-8")
        else:
            destination.write_bytes(path.read_bytes())
    (target / "README.md").write_text(_readme(name), "utf-8")
    return target


@click.command("new-plugin")
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to create the plugin's directory.",
)
def new_plugin(name: str, parent: Path) -> None:
    """Create entropic-mcp-NAME: a working plugin with one tool and its tests, ready to install."""
    target = scaffold(name, parent)
    click.echo(f"created {target}")
    click.echo(f'next: cd {target} && pip install -e ".[test]" && pytest && entropic-mcp check-plugin {name}')
