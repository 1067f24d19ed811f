"""entropic_mcp.toolkit: one rule for argument reading, typed settings, the result cap, the process runner."""

import os
import threading
from pathlib import Path
from typing import Literal

import anyio
import attrs
import pytest
from entropic_mcp import ConfigError, ToolError
from entropic_mcp.toolkit import (
    HeadTail,
    choice,
    flag,
    integer,
    number,
    result_limit,
    run_process,
    run_process_sync,
    settings_from_table,
    strings,
    text,
)
from hypothesis import given, settings
from hypothesis import strategies as st

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)


# -- argument readers ----------------------------------------------------------------------------


@given(JSON_SCALARS)
def test_integer_accepts_exactly_ints_and_integral_floats_never_bools(value):
    integral = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )
    if value is None:
        assert integer({"n": value}, "n", default=7) == 7
    elif integral:
        got = integer({"n": value}, "n")
        assert type(got) is int and got == value
    else:
        with pytest.raises(ToolError, match="'n' must be an integer"):
            integer({"n": value}, "n")


def test_integer_rule_examples_and_bounds():
    assert integer({"n": 3.0}, "n") == 3
    for bad in (3.5, True, False, "3", [3]):
        with pytest.raises(ToolError) as caught:
            integer({"n": bad}, "n")
        assert caught.value.code == "invalid_args"
    with pytest.raises(ToolError, match="between 1 and 5, got 6"):
        integer({"n": 6}, "n", minimum=1, maximum=5)
    with pytest.raises(ToolError, match="missing required argument 'n'"):
        integer({}, "n", required=True)


def test_number_refuses_bools_and_non_finite_values():
    assert number({"x": 2}, "x") == 2.0
    for bad in (True, float("nan"), float("inf"), "1.5"):
        with pytest.raises(ToolError, match="a finite number"):
            number({"x": bad}, "x")


@pytest.mark.parametrize(
    ("value", "problem"),
    [("", "must not be empty"), ("a\x00b", "NUL byte"), ("\udcff", "not valid Unicode"), (5, "must be a string")],
)
def test_text_refuses_what_no_tool_can_use(value, problem):
    with pytest.raises(ToolError, match=problem):
        text({"s": value}, "s")


def test_text_defaults_strip_and_length():
    assert text({}, "s") is None
    assert text({}, "s", default="x") == "x"
    assert text({"s": "  y "}, "s", strip=True) == "y"
    assert text({"s": ""}, "s", allow_empty=True) == ""
    with pytest.raises(ToolError, match="at most 3"):
        text({"s": "abcd"}, "s", max_length=3)
    with pytest.raises(ToolError, match="missing required argument 's'"):
        text({}, "s", required=True)


def test_flag_choice_strings():
    assert flag({"f": True}, "f") is True and flag({}, "f", default=True) is True
    for bad in (1, 0, "true"):
        with pytest.raises(ToolError, match="true or false"):
            flag({"f": bad}, "f")
    assert choice({"c": "b"}, "c", ("a", "b"), default="a") == "b"
    with pytest.raises(ToolError, match="one of 'a', 'b'"):
        choice({"c": "z"}, "c", ("a", "b"), default="a")
    assert strings({"l": ["x", "y"]}, "l") == ["x", "y"]
    with pytest.raises(ToolError, match=r"'l\[1\]' must be a string"):
        strings({"l": ["x", 2]}, "l")
    with pytest.raises(ToolError, match="at least one"):
        strings({"l": []}, "l", allow_empty_list=False)


# -- settings ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class WeatherSettings:
    units: Literal["metric", "imperial"] = "metric"
    retries: int = attrs.field(default=2, metadata={"min": 0, "max": 10})
    timeout: float = 5.0
    cache: bool = True
    cities: tuple[str, ...] = ()
    api_key: str | None = None
    data_dir: Path = Path("data")


def test_settings_from_a_table_with_typed_fields():
    settings = settings_from_table(
        WeatherSettings,
        {"units": "imperial", "retries": 3.0, "timeout": 2, "cities": ["Oslo"], "data_dir": "d"},
        server="weather",
    )
    assert settings == WeatherSettings(units="imperial", retries=3, timeout=2.0, cities=("Oslo",), data_dir=Path("d"))
    assert settings_from_table(WeatherSettings, {}, server="weather") == WeatherSettings()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"unit": "metric"}, "unknown key(s) 'unit'; expected one of: api_key, cache, cities"),
        ({"units": "kelvin"}, "units: expected one of 'metric', 'imperial', got 'kelvin'"),
        ({"retries": True}, "retries: expected an integer, got True"),
        ({"retries": 2.5}, "retries: expected an integer, got 2.5"),
        ({"retries": 11}, "retries: expected a number at least 0 and at most 10, got 11"),
        ({"timeout": "5"}, "timeout: expected a number"),
        ({"cache": 1}, "cache: expected true or false"),
        ({"cities": "Oslo"}, "cities: expected an array"),
        ({"cities": ["Oslo", 3]}, "cities[1]: expected a string"),
        ({"api_key": 5}, "api_key: expected a string"),
    ],
)
def test_settings_errors_name_the_file_table_and_key(table, message):
    with pytest.raises(ConfigError) as caught:
        settings_from_table(WeatherSettings, table, server="weather", source="entropic-mcp.toml")
    assert str(caught.value).startswith("entropic-mcp.toml: [servers.weather]")
    assert message in str(caught.value)


def test_settings_extra_keys_are_left_to_the_server_base():
    assert settings_from_table(
        WeatherSettings, {"timeout_seconds": 3}, server="w", extra_keys=frozenset({"timeout_seconds"})
    )


# -- the result cap --------------------------------------------------------------------------------


def test_result_limit_reads_the_pipeline_cap_of_the_call(tmp_path):
    from entropic_mcp import CallContext
    from entropic_mcp.testing import make_manager

    manager = make_manager(tmp_path, config={"pipeline": {"max_result_bytes": 5000}})
    try:
        assert result_limit(CallContext(manager=manager)) == 5000
    finally:
        manager.close()
    assert result_limit(CallContext()) == 0


# -- running a program ----------------------------------------------------------------------------


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_run_process_output_exit_code_and_stderr(tmp_path):
    result = run_process_sync(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=30)
    assert result.exit_code == 3 and not result.ok
    assert result.stdout.text() == "out\n" and result.stderr is not None and result.stderr.text() == "err\n"
    merged = run_process_sync(["sh", "-c", "echo a; echo b >&2"], cwd=tmp_path, timeout=30, merge_stderr=True)
    assert sorted(merged.stdout.text().split()) == ["a", "b"] and merged.stderr is None
    fed = run_process_sync(["cat"], cwd=tmp_path, timeout=30, stdin=b"piped")
    assert fed.stdout.text() == "piped"


def test_run_process_keeps_head_and_tail_within_the_cap(tmp_path):
    script = "import sys; sys.stdout.write('H' * 1000 + 'M' * 100000 + 'T' * 1000)"
    result = run_process_sync([os.sys.executable, "-c", script], cwd=tmp_path, timeout=60, max_output_bytes=2000)
    kept = result.stdout.bytes()
    assert len(kept) == 2000 and kept.startswith(b"H" * 1000) and kept.endswith(b"T" * 1000)
    assert result.stdout.omitted == 100000 and "[... 100000 bytes omitted ...]" in result.stdout.text()


def test_head_tail_across_small_feeds():
    buffer = HeadTail(10)
    for byte in b"0123456789abcdefghij":
        buffer.feed(bytes([byte]))
    assert buffer.bytes() == b"01234fghij" and buffer.omitted == 10


def test_a_timeout_stops_the_whole_group_including_background_children(tmp_path):
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; trap '' TERM; sleep 300"
    result = run_process_sync(["sh", "-c", script], cwd=tmp_path, timeout=0.5, grace=0.3)
    assert result.timed_out and result.exit_code is None
    assert not _alive(int(pids.read_text()))


def test_cancellation_through_the_flag_stops_the_group(tmp_path):
    cancelled = threading.Event()
    timer = threading.Timer(0.3, cancelled.set)
    timer.start()
    result = run_process_sync(["sleep", "300"], cwd=tmp_path, timeout=300, cancelled=cancelled, grace=0.5)
    timer.join()
    assert result.cancelled and result.exit_code is None


def test_children_left_running_after_the_leader_exits_are_stopped(tmp_path):
    pids = tmp_path / "pids"
    result = run_process_sync(["sh", "-c", f"sleep 300 & echo $! > {pids}"], cwd=tmp_path, timeout=30, grace=0.5)
    assert result.exit_code == 0
    assert not _alive(int(pids.read_text()))


def test_a_cancelled_task_stops_the_group(tmp_path):
    pids = tmp_path / "pids"

    async def main():
        with anyio.move_on_after(0.5):
            await run_process(["sh", "-c", f"echo $$ > {pids}; sleep 300"], cwd=tmp_path, timeout=300, grace=0.5)

    anyio.run(main)
    assert not _alive(int(pids.read_text()))


def test_a_missing_program_is_a_tool_error(tmp_path):
    with pytest.raises(ToolError, match="cannot run 'no-such-program-xyz'") as caught:
        run_process_sync(["no-such-program-xyz"], cwd=tmp_path, timeout=5)
    assert caught.value.code == "not_found"


def test_stop_at_cap_stops_an_endless_program_and_keeps_the_head(tmp_path):
    seen = []
    result = run_process_sync(
        ["yes", "line"], cwd=tmp_path, timeout=60, max_output_bytes=1000, stop_at_cap=True, on_output=seen.append
    )
    assert result.stopped_at_cap and result.ok and not result.timed_out
    assert result.stdout.bytes() == (b"line\n" * 200)[:1000]
    assert result.stdout.truncated and sum(map(len, seen)) == result.stdout.total


def test_on_output_sees_the_output_as_it_arrives(tmp_path):
    seen = []
    result = run_process_sync(["sh", "-c", "echo one; echo two"], cwd=tmp_path, timeout=30, on_output=seen.append)
    assert b"".join(seen) == b"one\ntwo\n" == result.stdout.bytes()


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=50), max_size=40), st.integers(2, 64), st.booleans())
def test_head_tail_keeps_exactly_the_first_and_last_bytes(pieces, limit, keep_tail):
    buffer = HeadTail(limit, keep_tail=keep_tail)
    for piece in pieces:
        buffer.feed(piece)
    whole = b"".join(pieces)
    head_size = limit // 2 if keep_tail else limit
    tail_size = limit - head_size if keep_tail else 0
    head = whole[:head_size]
    rest = whole[len(head) :]
    tail = rest[len(rest) - min(tail_size, len(rest)) :]
    assert buffer.bytes() == head + tail
    assert buffer.total == len(whole) and buffer.omitted == len(whole) - len(head) - len(tail)


def test_stdin_larger_than_a_pipe_buffer_is_fed_whole(tmp_path):
    data = bytes(range(256)) * 4096  # 1 MiB: written as the program reads, never all at once
    script = "import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    result = run_process_sync([os.sys.executable, "-c", script], cwd=tmp_path, timeout=60, stdin=data)
    import hashlib

    assert result.exit_code == 0 and result.stdout.text().strip() == hashlib.sha256(data).hexdigest()


def test_a_program_that_ignores_its_input_is_no_error(tmp_path):
    for program in (["true"], ["sh", "-c", "exec 0<&-; echo done"], ["head", "-c", "3"]):
        result = run_process_sync(program, cwd=tmp_path, timeout=30, stdin=b"x" * (1 << 20))
        assert result.exit_code == 0 and not result.timed_out, program


def test_stderr_has_its_own_cap(tmp_path):
    script = "import sys; sys.stderr.write('E' * 50000); sys.stdout.write('O' * 5000)"
    result = run_process_sync(
        [os.sys.executable, "-c", script], cwd=tmp_path, timeout=60, max_output_bytes=10000, stderr_bytes=100
    )
    assert result.stdout.bytes() == b"O" * 5000 and not result.stdout.truncated
    assert result.stderr is not None and len(result.stderr.bytes()) == 100 and result.stderr.omitted == 49900


def test_output_past_the_cap_is_marked_even_when_the_program_ends_at_once(tmp_path):
    # the exit and the cap can be seen in one turn of the loop: the cut must still be reported
    for size in (1001, 4096, 70000, 300000):
        result = run_process_sync(
            ["head", "-c", str(size), "/dev/zero"], cwd=tmp_path, timeout=30, max_output_bytes=1000, stop_at_cap=True
        )
        assert result.stopped_at_cap and result.ok and result.stdout.truncated, size
        assert result.stdout.bytes() == b"\0" * 1000
    exact = run_process_sync(
        ["head", "-c", "1000", "/dev/zero"], cwd=tmp_path, timeout=30, max_output_bytes=1000, stop_at_cap=True
    )
    assert not exact.stopped_at_cap and not exact.stdout.truncated and exact.exit_code == 0


def test_a_failing_output_callback_stops_the_group_and_is_raised(tmp_path):
    pids = tmp_path / "pids"

    def explode(data: bytes) -> None:
        raise RuntimeError("progress sink broke")

    with pytest.raises(RuntimeError, match="progress sink broke"):
        run_process_sync(
            ["sh", "-c", f"echo $$ > {pids}; sleep 300 & echo started; wait"],
            cwd=tmp_path,
            timeout=300,
            grace=0.5,
            on_output=explode,
        )
    assert not _alive(int(pids.read_text()))


def test_a_leader_ignoring_term_at_the_cap_is_killed_after_the_grace(tmp_path):
    # (stdout is closed at the cap, so a plain writer dies of SIGPIPE: this one ignores that too)
    script = "trap '' TERM PIPE; while :; do echo line; done 2>/dev/null"
    result = run_process_sync(
        ["sh", "-c", script], cwd=tmp_path, timeout=60, max_output_bytes=100, stop_at_cap=True, grace=0.2
    )
    assert result.stopped_at_cap and not result.timed_out and result.exit_code == -9


def test_many_runs_leak_no_descriptor_and_no_child(tmp_path):
    import asyncio

    run_process_sync(["true"], cwd=tmp_path, timeout=30)
    before = len(os.listdir("/proc/self/fd"))

    async def burst() -> list[int | None]:
        runs = [
            run_process(["sh", "-c", f"echo {i}; echo e >&2"], cwd=tmp_path, timeout=30, stdin=b"in") for i in range(40)
        ]
        runs += [run_process(["sleep", "300"], cwd=tmp_path, timeout=0.2, grace=0.2) for _ in range(5)]
        return [result.exit_code for result in await asyncio.gather(*runs)]

    codes = asyncio.run(burst())
    assert codes == [0] * 40 + [None] * 5
    assert len(os.listdir("/proc/self/fd")) == before
    with pytest.raises(ChildProcessError):  # every child was reaped: no zombie is left
        os.waitpid(-1, os.WNOHANG)


def test_without_pidfds_a_thread_sees_the_exit(tmp_path, monkeypatch):
    # an old kernel (or another Unix): os.pidfd_open is missing or fails with ENOSYS
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    result = run_process_sync(["sh", "-c", "echo out; exit 4"], cwd=tmp_path, timeout=30)
    assert result.exit_code == 4 and result.stdout.text() == "out\n"
    stopped = run_process_sync(["sleep", "300"], cwd=tmp_path, timeout=0.3, grace=0.3)
    assert stopped.timed_out and stopped.exit_code is None
    capped = run_process_sync(["yes"], cwd=tmp_path, timeout=30, max_output_bytes=100, stop_at_cap=True, grace=0.3)
    assert capped.stopped_at_cap and capped.ok


def _guide_section_three() -> str:
    """The server example of docs/plugin-authors.md, section 3, as the guide prints it."""
    guide = (Path(__file__).parents[2] / "docs" / "plugin-authors.md").read_text(encoding="utf-8")
    section = guide.split("## 3. Write the server and register it", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_guides_own_server_takes_every_base_key_the_user_guide_promises(tmp_path):
    from entropic_mcp import ToolBase, ToolDefinition
    from entropic_mcp.toolkit import SERVER_BASE_KEYS

    class WordCount(ToolBase):  # section 2's tool; its definition file is not part of the guide's text
        definition = ToolDefinition(name="word_count", description="Count words.", input_schema={"type": "object"})

        def __init__(self, server):
            super().__init__()

        def execute(self, args, ctx):
            return "0"

    namespace: dict[str, object] = {"WordCount": WordCount, "__name__": "guide_example"}
    exec(compile(_guide_section_three(), "plugin-authors.md", "exec"), namespace)
    server = namespace["WordServer"](root=tmp_path)
    assert {"timeout_seconds", "max_threads"} == SERVER_BASE_KEYS
    server.configure({"max_words": 5, "timeout_seconds": 3, "max_threads": 2})
    assert (server.settings.max_words, server.max_threads, server.default_timeout_seconds) == (5, 2, 3.0)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) 'max_word'.*max_threads"):
        server.configure({"max_word": 5})
    with pytest.raises(ConfigError, match="max_threads: expected a whole number"):
        server.configure({"max_threads": 0})


def test_the_guides_own_plugin_takes_the_base_keys_from_a_config_file(tmp_path):
    """The guide's section-3 plugin, loaded by its hook and configured by the manager from a
    project file that sets the base keys the user guide promises every server table takes."""
    import sys
    import types

    from entropic_mcp import ToolBase, ToolDefinition
    from entropic_mcp.testing import make_manager

    class WordCount(ToolBase):
        definition = ToolDefinition(name="word_count", description="Count words.", input_schema={"type": "object"})

        def __init__(self, server):
            super().__init__()

        def execute(self, args, ctx):
            return "0"

    module = types.ModuleType("guide_words_plugin")
    module.WordCount = WordCount  # type: ignore[attr-defined]
    exec(compile(_guide_section_three(), "plugin-authors.md", "exec"), module.__dict__)
    sys.modules[module.__name__] = module
    try:
        table = {"max_words": 5, "timeout_seconds": 3, "max_threads": 2}
        manager = make_manager(tmp_path, config={"servers": {"words": table}}, plugins=[module])
        try:
            server = manager.servers["words"]
            assert (server.settings.max_words, server.max_threads, server.default_timeout_seconds) == (5, 2, 3.0)
        finally:
            manager.close()
    finally:
        del sys.modules[module.__name__]
