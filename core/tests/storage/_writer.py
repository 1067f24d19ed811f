"""A writer process for the crash and concurrency tests (run as a script, never collected).

``python _writer.py STORE ROOT_ID PREFIX COUNT [COMPACT_BYTES]`` creates, fills and completes
COUNT delegations under ROOT_ID, printing one acknowledgement line after each operation returns:

    D <delegation_id> <child_id>     create_delegation returned
    M <child_id> <n>                 save_messages returned (n messages in that call)
    C <delegation_id>                complete_delegation returned
    T <count>                        close() returned after recording <count> tool calls
"""

from __future__ import annotations

import sys

from entropic_mcp import CallOutcome, ServerResponse
from entropic_mcp._storage._tinydb import TinyDBBackend
from entropic_mcp.storage import ToolCallRecord


def main() -> None:
    store, root, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    compact_bytes = int(sys.argv[5]) if len(sys.argv) > 5 else 8 << 20
    backend = TinyDBBackend(store, compact_bytes=compact_bytes, audit_batch=16)
    out = sys.stdout
    calls = 0
    for i in range(count):
        delegation_id, child = backend.create_delegation(
            root, "lead", "coder", f"{prefix} task {i}", 3, [{"path": f"f{i}.py"}]
        )
        out.write(f"D {delegation_id} {child}\n")
        out.flush()
        # Every fifth batch is large, so kills also land inside multi-page writes.
        size = 20_000 if i % 5 == 4 else 40
        backend.save_messages(
            child, [{"role": "user", "content": f"{prefix}-{i}-" + "x" * size}, {"role": "assistant", "content": "ok"}]
        )
        out.write(f"M {child} 2\n")
        out.flush()
        backend.complete_delegation(delegation_id, "completed", f"{prefix} summary {i} crashproof")
        out.write(f"C {delegation_id}\n")
        out.flush()
        backend.record_tool_call(
            ToolCallRecord.from_outcome(
                CallOutcome(
                    name="demo.echo",
                    response=ServerResponse(result="ok"),
                    kind="success",
                    elapsed_ms=0.1,
                    conversation_id=child,
                    args={"i": i},
                )
            )
        )
        calls += 1
    backend.close()
    out.write(f"T {calls}\n")
    out.flush()


if __name__ == "__main__":
    main()
