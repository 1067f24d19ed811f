"""The sub-commands of ``entropic-mcp``, each named with where it lives: the package and the click
group both read this table (a module of its own, so the group never imports the package)."""

from __future__ import annotations

#: name -> (module:attribute, one-line help shown by --help without importing the module)
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "plugins": ("entropic_mcp.cli._inspect:plugins", "List plugins, their status, hooks and servers."),
    "tools": ("entropic_mcp.cli._inspect:tools", "List every tool with its access level and annotations."),
    "call": ("entropic_mcp.cli._call:call", "Call one tool through the whole pipeline."),
    "run": ("entropic_mcp.cli._run:run", "Run a task through the reference host, each tier on a real model."),
    "init": ("entropic_mcp.cli._config:init", "Write a commented starter entropic-mcp.toml."),
    "config": ("entropic_mcp.cli._config:config", "Print the effective configuration and its sources."),
    "check-rule": (
        "entropic_mcp.cli._rule:check_rule",
        "What the rules decide for one call, and what the OS sandbox lets it touch.",
    ),
    "check-plugin": ("entropic_mcp.cli._check:check_plugin", "Run the conformance checks against a plugin."),
    "new-plugin": ("entropic_mcp.cli._scaffold:new_plugin", "Create a working, tested plugin to build on."),
    "storage": (
        "entropic_mcp.cli._storage:storage",
        "Look into the store: conversations, delegations, search; prune old plugin state.",
    ),
    "external": (
        "entropic_mcp.cli._external:external",
        "External MCP servers: approve a project's .mcp.json, list what runs.",
    ),
    "serve": ("entropic_mcp.cli._serve:serve", "Serve every tool over MCP (stdio or Streamable HTTP)."),
    "demo": ("entropic_mcp.cli._serve:demo", "Start serve and drive it with a real MCP client."),
}
