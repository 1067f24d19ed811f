"""Parsing git's machine formats (porcelain v2 status, NUL-separated log and ref lists) into JSON data."""

from __future__ import annotations

from typing import Any

_CHANGE = {
    "M": "modified",
    "T": "type_changed",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
}

_CONFLICT = {
    "DD": "both_deleted",
    "AU": "added_by_us",
    "UD": "deleted_by_them",
    "UA": "added_by_them",
    "DU": "deleted_by_us",
    "AA": "both_added",
    "UU": "both_modified",
}

LOG_FORMAT = "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s"
#: One record per commit: RS, the fields, the body, GS; then (with --numstat -z) its file stats.
LOG_DETAIL_FORMAT = "--format=%x1e%H%x1f%an%x1f%ae%x1f%aI%x1f%s%x1f%b%x1d"
BRANCH_FORMAT = "--format=%(refname)%00%(symref)"


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _entry(path: str, code: str, origin: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "status": _CHANGE.get(code, code)}
    if origin is not None:
        entry["from"] = origin
    return entry


def parse_status(data: bytes, *, truncated: bool = False) -> dict[str, Any]:
    """``git status --porcelain=v2 --branch -z`` output as the status tool's result."""
    result: dict[str, Any] = {
        "branch": None,
        "upstream": None,
        "ahead": 0,
        "behind": 0,
        "staged": [],
        "unstaged": [],
        "untracked": [],
        "conflicted": [],
    }
    records = _decode(data).split("\x00")  # decoded once, as in parse_log
    if truncated:
        records = records[:-1]  # the last record may be cut in the middle
        result["truncated"] = True
    staged, unstaged = result["staged"], result["unstaged"]
    index = 0
    while index < len(records):
        record = records[index]
        index += 1
        kind = record[:1]
        if kind == "1":
            fields = record.split(" ", 8)
            if len(fields) == 9:
                x, y = fields[1][0], fields[1][1]
                if x != ".":
                    staged.append(_entry(fields[8], x))
                if y != ".":
                    unstaged.append(_entry(fields[8], y))
        elif kind == "2":
            fields = record.split(" ", 9)
            origin = records[index] if index < len(records) else None
            index += 1
            if len(fields) == 10:
                x, y = fields[1][0], fields[1][1]
                if x != ".":
                    staged.append(_entry(fields[9], x, origin if x in "RC" else None))
                if y != ".":
                    unstaged.append(_entry(fields[9], y, origin if y in "RC" else None))
        elif kind == "u":
            fields = record.split(" ", 10)
            if len(fields) == 11:
                result["conflicted"].append({"path": fields[10], "status": _CONFLICT.get(fields[1], fields[1])})
        elif kind == "?":
            result["untracked"].append(record[2:])
        elif record.startswith("# branch.head "):
            head = record[len("# branch.head ") :]
            result["branch"] = None if head == "(detached)" else head
        elif record.startswith("# branch.upstream "):
            result["upstream"] = record[len("# branch.upstream ") :]
        elif record.startswith("# branch.ab "):
            ahead, _, behind = record[len("# branch.ab ") :].partition(" ")
            result["ahead"], result["behind"] = abs(int(ahead)), abs(int(behind))
    return result


def parse_log(data: bytes, *, truncated: bool = False) -> list[dict[str, str]]:
    """``git log -z`` records in ``LOG_FORMAT`` as ``[{sha, author, email, date, subject}]``."""
    # decoded once, not per record: NUL never occurs inside a UTF-8 sequence, so the result is
    # the same and a 50-commit log parses in about two thirds of the time
    records = _decode(data).split("\x00") if data else []
    if truncated:
        records = records[:-1]
    commits = []
    for raw in records:
        fields = raw.lstrip("\n").split("\x1f", 4)
        if len(fields) == 5:
            sha, author, email, date, subject = fields
            commits.append({"sha": sha, "author": author, "email": email, "date": date, "subject": subject})
    return commits


def parse_branches(data: bytes) -> list[str]:
    """``git branch --format=BRANCH_FORMAT`` lines as short names (``main``, ``origin/main``)."""
    names = []
    for line in _decode(data).splitlines():
        refname, _, symref = line.partition("\x00")
        if symref:  # origin/HEAD -> origin/main is an alias, not a branch
            continue
        if refname.startswith("refs/heads/"):
            names.append(refname[len("refs/heads/") :])
        elif refname.startswith("refs/remotes/"):
            names.append(refname[len("refs/remotes/") :])
    return names


def parse_numstat(data: bytes) -> list[dict[str, Any]]:
    """``--numstat -z`` entries: ``{"path", "added", "deleted"}`` (``null`` counts for binary
    files), renames with ``from``."""
    tokens = data.lstrip(b"\x00\n").split(b"\x00")
    files: list[dict[str, Any]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.strip():
            continue
        added, _, rest = token.partition(b"\t")
        deleted, _, path = rest.partition(b"\t")
        entry: dict[str, Any] = {
            "path": "",
            "added": int(added) if added.isdigit() else None,
            "deleted": int(deleted) if deleted.isdigit() else None,
        }
        if path:
            entry["path"] = _decode(path)
        elif index + 1 < len(tokens):
            entry["from"], entry["path"] = _decode(tokens[index]), _decode(tokens[index + 1])
            index += 2
        else:
            break  # cut in the middle of a rename
        files.append(entry)
    return files


def parse_log_detail(data: bytes, *, stats: bool, truncated: bool = False) -> list[dict[str, Any]]:
    """``LOG_DETAIL_FORMAT`` records (with ``--numstat -z`` when ``stats``): commits with ``body``
    and, when asked, ``files``."""
    records = data.split(b"\x1e")[1:]
    if truncated and records:
        records = records[:-1]
    commits = []
    for record in records:
        header, _, tail = record.partition(b"\x1d")
        fields = header.split(b"\x1f", 5)
        if len(fields) < 6:
            continue
        sha, author, email, date, subject, body = (_decode(f) for f in fields)
        commit: dict[str, Any] = {
            "sha": sha,
            "author": author,
            "email": email,
            "date": date,
            "subject": subject,
            "body": body.rstrip("\n"),
        }
        if stats:
            commit["files"] = parse_numstat(tail)
        commits.append(commit)
    return commits
