"""A working plugin: one server, one tool."""

from entropic_mcp import AccessLevel, MCPServerBase, ToolBase, ToolDefinition, hookimpl


class Ping(ToolBase):
    definition = ToolDefinition(
        name="ping", description="Answer pong.", input_schema={"type": "object", "additionalProperties": False}
    )
    required_access_level = AccessLevel.READ

    def execute(self, args, ctx):
        return "pong"


class GoodServer(MCPServerBase):
    name = "good"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_tool(Ping())


@hookimpl
def entropic_mcp_servers(config):
    return GoodServer(root=config.root)
