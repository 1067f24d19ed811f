"""The outside-root policy: deny list, allow list, the tri-state and the approval hook."""

from __future__ import annotations

from pathlib import Path

import pytest
from entropic_mcp import hookimpl


class Approver:
    """A plugin answering entropic_mcp_approve_outside_root and recording every request."""

    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.requests: list = []
        self.__name__ = f"approver-{id(self)}"

    @hookimpl
    def entropic_mcp_approve_outside_root(self, request):
        self.requests.append(request)
        return self.answer


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path / "outside"
    (place / "private").mkdir(parents=True)
    (place / "notes.txt").write_text("outside notes\n")
    (place / "private" / "key.txt").write_text("key\n")
    return place.resolve()


def test_deny_list_beats_allow_list_and_true(make, outside):
    fs = make(
        {
            "allow_outside_root": True,
            "outside_root_allow": [str(outside)],
            "outside_root_deny": [str(outside / "private")],
        }
    )
    error = fs.error("read_file", {"path": str(outside / "private" / "key.txt")})
    assert error["error"] == "outside_root_denied" and "outside_root_deny" in error["message"]
    assert fs.ok("read_file", {"format": "json", "path": str(outside / "notes.txt")})["lines"] == ["outside notes"]


def test_allow_list_serves_without_asking(make, outside):
    approver = Approver(False)
    fs = make({"outside_root_allow": [str(outside)]}, plugins=[approver])
    data = fs.ok("read_file", {"format": "json", "path": str(outside / "notes.txt")})
    assert data["path"] == str(outside / "notes.txt")  # absolute outside the root
    assert approver.requests == []


def test_false_refuses_even_with_an_approver(make, outside):
    approver = Approver(True)
    fs = make({"allow_outside_root": False}, plugins=[approver])
    assert fs.error("read_file", {"path": str(outside / "notes.txt")})["error"] == "outside_root_denied"
    assert approver.requests == []


def test_optional_asks_the_hook_once_with_the_canonical_path_and_access(make, root, outside):
    approver = Approver(True)
    fs = make({"allow_outside_root": "optional"}, plugins=[approver])
    (root / "out").symlink_to(outside)
    assert fs.ok("read_file", {"format": "json", "path": "out/./private/../notes.txt"})["lines"] == ["outside notes"]
    [request] = approver.requests
    assert request.path == outside / "notes.txt"
    assert (request.access, request.tool, request.root, request.conversation_id) == (
        "read",
        "filesystem.read_file",
        root,
        "c1",
    )
    fs.ok("write_file", {"path": str(outside / "new.txt"), "content": "w\n"})
    assert [r.access for r in approver.requests] == ["read", "write"]
    assert (outside / "new.txt").read_text() == "w\n"


def test_approval_is_for_that_call_only(make, outside):
    approver = Approver(True)
    fs = make(plugins=[approver])
    fs.ok("read_file", {"path": str(outside / "notes.txt")})
    fs.ok("list_directory", {"path": str(outside)})
    assert len(approver.requests) == 2


def test_outside_results_use_absolute_paths(make, outside):
    fs = make({"allow_outside_root": True})
    assert fs.ok("glob", {"pattern": "**/*.txt", "path": str(outside)}) == [
        str(outside / "notes.txt"),
        str(outside / "private" / "key.txt"),
    ]
    assert fs.ok("grep", {"pattern": "notes", "path": str(outside)}) == [
        {"path": str(outside / "notes.txt"), "line": 1, "content": "outside notes"}
    ]
    listed = fs.ok("list_directory", {"path": str(outside)})
    assert [e["path"] for e in listed] == [str(outside / "notes.txt"), str(outside / "private")]


def test_rejected_write_creates_nothing(make, outside):
    approver = Approver(False)
    fs = make(plugins=[approver])
    error = fs.error("write_file", {"path": str(outside / "deep" / "dir" / "f.txt"), "content": "x"})
    assert error["error"] == "outside_root_rejected"
    assert not (outside / "deep").exists()
    assert approver.requests[0].access == "write"


def test_no_approver_names_the_config_keys(make, outside):
    fs = make()
    outcome, error = fs.call("read_file", {"path": str(outside / "notes.txt")})
    assert error["error"] == "outside_root_approval_required"
    assert "outside_root_allow" in error["message"] and "allow_outside_root" in error["message"]
    assert "[servers.filesystem]" in error["message"]
    assert error["config_keys"] == [
        "[servers.filesystem] outside_root_allow",
        "[servers.filesystem] allow_outside_root",
    ]
    assert outcome.response.directives == ()


def test_an_approver_without_an_answer_is_no_approval(make, outside):
    approver = Approver(None)
    fs = make(plugins=[approver])
    assert fs.error("read_file", {"path": str(outside / "notes.txt")})["error"] == "outside_root_approval_required"
    assert len(approver.requests) == 1


def test_refusal_is_not_anchored_and_reads_nothing(make, outside):
    approver = Approver(False)
    fs = make(plugins=[approver])
    outcome, error = fs.call("read_file", {"path": str(outside / "notes.txt")})
    assert error["error"] == "outside_root_rejected" and outcome.response.directives == ()
    assert "outside notes" not in outcome.response.result
    assert fs.server.tracker.files("c1") == 0
