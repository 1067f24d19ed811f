"""``entropic-mcp init`` and ``entropic-mcp config``."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import echo_json, load

STARTER = """\
# entropic-mcp configuration. Every key is optional. Lines marked (default) hold the value you get
# without them, or with no config file at all; the other lines are this starter's own choices.
# Reference: docs/user-guide.md.

[entropic_mcp]
root = "."                      # (default) the project root every server is confined to
# plugins = ["filesystem", "bash", "git", "entropic"]   # absent = every installed plugin

[storage]
backend = "tinydb"              # (default) embedded, nothing to run; "none" disables storage
# path = "/somewhere/store"     # default: outside the project, in your per-user data directory
                                # (~/.local/share/entropic-mcp/projects/<key>/store); no tool reads it

[permissions]
default = "ask"                 # (default) when no rule matches: "ask" | "allow" | "deny"
allow_read = true               # (default) read-only tools need no approval (deny and ask rules
                                # still apply; outside the root, allow_outside_root decides)
allow = ["bash.execute:ls *"]   # starter's choice (default: none)
deny = ["bash.execute:rm *", "filesystem.write_file:.git/*"]   # starter's choice (default: none)
# "always allow" answers are written to entropic-mcp.local.toml beside this file (keep it, and
# its .lock, out of version control: init adds both to .gitignore).

[pipeline]
max_result_bytes = 16384        # (default) 0 disables the cap
max_tool_calls_per_turn = 10    # (default)
same_tool_limit = 8             # starter's choice (default: 50)

# [identities.researcher]
# keys = { "filesystem.*" = "READ", "entropic.*" = "WRITE" }

[servers.filesystem]
allow_outside_root = "optional" # (default) false | true | "optional" (ask an approver)

[servers.bash]
timeout_seconds = 30            # (default)

[servers.entropic]
tiers = ["lead", "researcher", "coder"]   # starter's choice (default: none, delegation off)
"""
#: What ``init`` keeps out of version control: per-user approvals and their lock file.
IGNORED = ("entropic-mcp.local.toml", "entropic-mcp.local.toml.lock")


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.argument("directory", required=False, default=".", type=click.Path(file_okay=False))
def init(directory: str, force: bool) -> None:
    """Write a commented starter entropic-mcp.toml in DIRECTORY; keep the local files out of git."""
    target = Path(directory) / "entropic-mcp.toml"
    if target.exists() and not force:
        raise click.UsageError(f"{target} exists; pass --force to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(STARTER, encoding="utf-8")
    click.echo(f"wrote {target}")
    added = ignore_local_files(target.parent)
    if added:
        click.echo(f"added {', '.join(added)} to {target.parent / '.gitignore'}")


def ignore_local_files(directory: Path) -> list[str]:
    """Append the local files ``.gitignore`` does not name yet; returns what was added."""
    ignore = directory / ".gitignore"
    try:
        text = ignore.read_text("utf-8") if ignore.is_file() else ""
    except (OSError, UnicodeDecodeError) as exc:
        click.echo(f"could not read {ignore} ({exc}); add {', '.join(IGNORED)} to it yourself", err=True)
        return []
    present = {line.strip().lstrip("/") for line in text.splitlines()}
    missing = [name for name in IGNORED if name not in present]
    if not missing:
        return []
    lead = "" if not text or text.endswith("\n") else "\n"
    block = lead + "# entropic-mcp: per-user approvals (entropic-mcp init)\n" + "".join(f"{n}\n" for n in missing)
    try:
        with ignore.open("a", encoding="utf-8") as fh:
            fh.write(block)
    except OSError as exc:
        click.echo(f"could not write {ignore} ({exc.strerror}); add {', '.join(missing)} to it yourself", err=True)
        return []
    return missing


def _flatten(config: object) -> dict[str, object]:
    import attrs

    out: dict[str, object] = {"entropic_mcp.root": str(config.root), "entropic_mcp.plugins": config.plugins}  # type: ignore[attr-defined]
    for section in ("storage", "permissions", "pipeline", "serve"):
        record = getattr(config, section)
        for field in attrs.fields(type(record)):
            value = getattr(record, field.name)
            out[f"{section}.{field.name}"] = str(value) if isinstance(value, Path) else value
    out["storage.path"] = str(config.storage_path)  # type: ignore[attr-defined]  # the default is per project
    for name, identity in config.identities.items():  # type: ignore[attr-defined]
        out[f"identities.{name}"] = {k: v.name for k, v in identity.keys.items()}
    for name, table in config.servers.items():  # type: ignore[attr-defined]
        out[f"servers.{name}"] = dict(table)
    for name, external in getattr(config, "external", {}).items():
        data = {}
        for field in attrs.fields(type(external)):
            value = getattr(external, field.name)
            if field.name in ("headers", "env"):  # may hold credentials: names only
                value = {key: "***" for key in value}
            elif field.name == "access":
                value = {tool: level.name for tool, level in value.items()}
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            data[field.name] = value
        out[f"external.{name}"] = data
    sandbox = config.sandbox  # type: ignore[attr-defined]
    for field in attrs.fields(type(sandbox)):
        value = getattr(sandbox, field.name)
        if field.name == "servers":
            value = {name: attrs.asdict(o) for name, o in value.items()}
        out[f"sandbox.{field.name}"] = list(value) if isinstance(value, tuple) else value
    from .._sandbox import HostSandbox

    out["sandbox (in effect)"] = HostSandbox(config).describe()  # type: ignore[arg-type]
    return out


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def config(ctx: click.Context, as_json: bool) -> None:
    """Print the effective configuration and where each value came from."""
    cfg = load(ctx)
    values = _flatten(cfg)
    rows = [{"key": key, "value": value, "source": cfg.sources.get(key, "default")} for key, value in values.items()]
    if as_json:
        echo_json(
            {
                "file": str(cfg.path) if cfg.path else None,
                "local_file": str(cfg.local_path) if cfg.local_path else None,
                "values": rows,
            }
        )
        return
    from ._common import table

    click.echo(f"config file: {cfg.path or '(none: defaults)'}")
    table(
        "effective configuration",
        ["key", "value", "source"],
        [[r["key"], repr(r["value"]), str(r["source"])] for r in rows],
    )
