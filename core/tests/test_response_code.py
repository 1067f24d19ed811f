"""A failure's error code travels as ServerResponse.code, from the tool to the guards and the
outcome; the text is read for one only when the error arrived as text."""

from __future__ import annotations

from entropic_mcp import AccessLevel, MCPServerBase, ServerResponse, ToolBase, ToolDefinition, ToolError, ToolResult
from entropic_mcp.testing import call, make_manager

ALLOW = {"permissions": {"default": "allow"}}


def test_every_way_of_failing_carries_its_code():
    assert ServerResponse.refusal("invalid_args", "no").code == "invalid_args"
    assert ServerResponse.failure("Error: it broke").code == "error"
    assert ServerResponse(result="fine").code is None
    assert ServerResponse(result="fine", code="stale").code is None  # a success has no code
    assert ToolResult.error("file_changed", "read it again").code == "file_changed"
    # an error that arrived as text (an external server's, a result built by hand) states its code
    assert ServerResponse(result='{"error": "busy", "message": "later"}', is_error=True).code == "busy"
    assert ServerResponse._make("not json", (), True).code == "error"


class _Codes(ToolBase):
    """Fails with a code its text does not show: only the field can tell the guards."""

    definition = ToolDefinition(name="write", description="", input_schema={"type": "object"})
    required_access_level = AccessLevel.WRITE

    def __init__(self, codes):
        super().__init__()
        self.codes = iter(codes)

    def execute(self, args, ctx):
        code = next(self.codes)
        if code == "raise":
            raise ToolError("server_busy", "the server is busy; try again")
        return ToolResult(text="it did not work", is_error=True, code=code)


def _manager(tmp_path, codes):
    class Server(MCPServerBase):
        name = "fs"

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(_Codes(codes))

    return make_manager(tmp_path, config=ALLOW, servers=[Server(root=tmp_path)])


def test_the_loop_guard_counts_the_code_the_tool_gave_not_its_text(tmp_path):
    manager = _manager(tmp_path, ["read_before_write", "file_changed", "file_changed", "file_changed"])
    outcomes = [call(manager, "fs.write", {"content": "A"}) for _ in range(4)]
    assert [o.kind for o in outcomes] == ["error", "error", "error", "rejected_loop"]
    assert [o.response.code for o in outcomes[:3]] == ["read_before_write", "file_changed", "file_changed"]


def test_a_transient_code_is_never_counted_as_a_loop(tmp_path):
    manager = _manager(tmp_path, ["server_busy", "server_busy", "server_busy", "raise", "raise"])
    outcomes = [call(manager, "fs.write", {"content": "A"}) for _ in range(5)]
    assert [o.kind for o in outcomes] == ["error"] * 5
    assert outcomes[-1].response.code == "server_busy"


def test_a_timeout_is_told_by_its_code(tmp_path):
    import time

    class Slow(ToolBase):
        definition = ToolDefinition(name="slow", description="", input_schema={"type": "object"})
        required_access_level = AccessLevel.READ

        def execute(self, args, ctx):
            ctx.cancelled.wait(5)
            time.sleep(0)
            return "late"

    class Server(MCPServerBase):
        name = "slow"
        default_timeout_seconds = 0.2

        def __init__(self, **kw):
            super().__init__(**kw)
            self.register_tool(Slow())

    manager = make_manager(tmp_path, config=ALLOW, servers=[Server(root=tmp_path)])
    outcome = call(manager, "slow.slow", {})
    assert (outcome.kind, outcome.response.code) == ("timeout", "timeout")
