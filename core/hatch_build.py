"""Build hook: ship ``plugins/_template`` inside the core as ``entropic_mcp/_template``.

``entropic-mcp new-plugin`` scaffolds from it. The template stays one directory in the
repository (a working, tested plugin of its own); building from the repository copies it in,
and an sdist carries the copy under ``src/`` so a wheel built from the sdist has it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SKIP_PARTS = ("__pycache__", ".pytest_cache", ".mypy_cache")


class TemplateHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        source = Path(self.root).parent / "plugins" / "_template"
        if not source.is_dir():
            return  # built from an sdist: the copy is already in src/entropic_mcp/_template
        prefix = "entropic_mcp/_template" if self.target_name == "wheel" else "src/entropic_mcp/_template"
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if not path.is_file() or relative.as_posix() == "LICENSE":
                continue
            if any(part in SKIP_PARTS or part.endswith(".egg-info") for part in relative.parts):
                continue
            build_data["force_include"][str(path)] = f"{prefix}/{relative.as_posix()}"
