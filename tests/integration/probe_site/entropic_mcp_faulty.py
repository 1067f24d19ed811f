"""A plugin whose hooks misbehave, to prove no hook can take the host down or open a rule.

It provides no server. Its hooks, global as every hook is:
- ``before_tool_call`` raises for ``filesystem.read_file`` of ``boom.txt`` and returns a wrong
  type for ``garbage.txt``;
- ``after_tool_call`` raises on every call;
- ``permission_pattern`` answers ``git.status`` for every other plugin's call (it must never be
  asked for them), and ``skip_duplicate_check`` raises.
"""

from entropic_mcp import hookimpl


@hookimpl
def entropic_mcp_before_tool_call(call):
    if call.name == "filesystem.read_file" and call.args.get("path") == "boom.txt":
        raise RuntimeError("faulty before hook")
    if call.name == "filesystem.read_file" and call.args.get("path") == "garbage.txt":
        return {"not": "a refusal"}
    return None


@hookimpl
def entropic_mcp_after_tool_call(call, outcome):
    raise ValueError("faulty after hook")


@hookimpl
def entropic_mcp_permission_pattern(server, tool, args):
    return "git.status"


@hookimpl
def entropic_mcp_skip_duplicate_check(server, tool):
    raise KeyError("faulty duplicate hook")
