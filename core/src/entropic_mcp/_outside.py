"""OutsideRootRequest: a path outside the project root a tool asks about, in a leaf module (the
call context's services take it without importing the call records, which name the context)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import attrs


@attrs.frozen(kw_only=True)
class OutsideRootRequest:
    """A path outside the project root that a tool wants to read or write."""

    path: Path
    tool: str
    access: Literal["read", "write"]
    root: Path
    conversation_id: str = "default"
