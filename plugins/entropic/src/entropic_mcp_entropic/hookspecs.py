"""The hooks the entropic plugin adds (declared through ``entropic_mcp_add_hookspecs``).

Implement them with ``entropic_mcp.hookimpl`` in the host, like the core's hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from entropic_mcp.hookspecs import hookspec

if TYPE_CHECKING:
    from ._state import EngineState


# -- host state --------------------------------------------------------------------------------


@hookspec(firstresult=True)
def entropic_mcp_engine_state(conversation_id: str, identity: str | None) -> EngineState | None:
    """Report the host engine's state to ``entropic.diagnose``, ``inspect`` and ``context_inspect``.

    Called by the entropic server once per call of one of those three tools, in the call's
    worker thread.

    Args:
        conversation_id: the conversation the tool was called in.
        identity: the tier or agent that called it (``None`` when the host set none).

    Returns:
        An ``EngineState(state=..., identities=..., config=..., messages=...)`` (every field
        optional; a plain mapping with those keys is accepted too), or ``None`` when this
        provider knows nothing about the conversation. The first non-None result wins; with
        none, the tools report what the core knows (servers, tools, history, metrics) and
        ``context_inspect`` reads the messages from storage. A provider that raises is reported
        in the result, not propagated.

    Example::

        from entropic_mcp_entropic import EngineState

        @hookimpl
        def entropic_mcp_engine_state(conversation_id, identity):
            engine = ENGINES.get(conversation_id)
            if engine is None:
                return None
            return EngineState(state={"phase": engine.phase, "turn": engine.turn},
                               messages=engine.messages)
    """
