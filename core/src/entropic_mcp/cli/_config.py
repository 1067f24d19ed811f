"""``entropic-mcp init`` and ``entropic-mcp config``."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import echo_json, load

STARTER = """\
# entropic-mcp configuration. Every key is optional; the values shown are the defaults
# unless marked otherwise. Reference: docs/user-guide.md.

[entropic_mcp]
root = "."                      # the project root every server is confined to
# plugins = ["filesystem", "bash", "git", "entropic"]   # absent = every installed plugin

[storage]
backend = "tinydb"              # embedded, nothing to run; "none" disables storage
# path = "/somewhere/store"     # default: outside the project, in your per-user data directory
                                # (~/.local/share/entropic-mcp/projects/<key>/store); no tool reads it

[permissions]
default = "ask"                 # when no rule matches: "ask" | "allow" | "deny"
allow_read = true               # read-only tools need no approval (deny rules still apply)
allow = ["git.status", "git.diff", "git.log", "bash.execute:ls *"]
deny = ["bash.execute:rm *", "filesystem.write_file:.git/*"]
# "always allow" answers are written to entropic-mcp.local.toml beside this file.

[pipeline]
max_result_bytes = 16384        # 0 disables the cap
max_tool_calls_per_turn = 10
same_tool_limit = 8

# [identities.researcher]
# keys = { "filesystem.*" = "READ", "entropic.*" = "WRITE" }

[servers.filesystem]
allow_outside_root = "optional" # false | true | "optional" (ask an approver)

[servers.bash]
timeout_seconds = 30

[servers.entropic]
tiers = ["lead", "researcher", "coder"]
"""


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.argument("directory", required=False, default=".", type=click.Path(file_okay=False))
def init(directory: str, force: bool) -> None:
    """Write a commented starter entropic-mcp.toml in DIRECTORY."""
    target = Path(directory) / "entropic-mcp.toml"
    if target.exists() and not force:
        raise click.UsageError(f"{target} exists; pass --force to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(STARTER, encoding="utf-8")
    click.echo(f"wrote {target}")


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
