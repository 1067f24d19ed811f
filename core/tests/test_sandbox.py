"""entropic_mcp._sandbox: the OS boundary under every program the tools start (bubblewrap)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from entropic_mcp import ConfigError, ToolError
from entropic_mcp import _sandbox as sandbox_mod
from entropic_mcp._config import config_from_dict
from entropic_mcp._pipeline._rules import PermissionRules
from entropic_mcp._sandbox import Found, HostSandbox, Sandbox, blocked_note
from entropic_mcp.toolkit import run_process, run_process_sync, sandbox_for

FOUND = sandbox_mod.find()
needs_bwrap = pytest.mark.skipif(
    FOUND.path is None and os.environ.get("CI") != "true", reason=f"no working bwrap here: {FOUND.problem}"
)


def host(root: Path, **sandbox: object) -> HostSandbox:
    data: dict[str, object] = {}
    for section in ("permissions", "storage"):
        if section in sandbox:
            data[section] = sandbox.pop(section)
    data["sandbox"] = {"mode": "required", **sandbox}
    config = config_from_dict(data, root=root)
    return HostSandbox(config, PermissionRules(config.permissions), found=FOUND)


def run(sb: Sandbox, script: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    done = run_process_sync(["bash", "-c", script], cwd=cwd, timeout=20, merge_stderr=True, env=env, sandbox=sb)
    return done.exit_code, done.stdout.text()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "entropic-mcp.toml").write_text("[permissions]\n", encoding="utf-8")
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("print(1)\n", encoding="utf-8")
    return project


# -- config ----------------------------------------------------------------------------------------


def test_sandbox_section_defaults_to_auto_without_network(tmp_path):
    config = config_from_dict({}, root=tmp_path)
    assert (config.sandbox.mode, config.sandbox.network, config.sandbox.writable) == ("auto", False, ())


def test_sandbox_section_reads_per_server_overrides(tmp_path):
    config = config_from_dict(
        {"sandbox": {"mode": "required", "servers": {"git": {"network": True, "writable": ["../cache"]}}}},
        root=tmp_path,
    )
    assert config.sandbox.servers["git"].network is True
    assert config.sandbox.servers["git"].mode is None
    sb = HostSandbox(config, found=FOUND).for_server("git")
    assert sb.network is True and (tmp_path.parent / "cache").resolve() in sb.writable


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"mode": "strict"}, "sandbox.mode"),
        ({"network": "yes"}, "sandbox.network"),
        ({"servers": {"bash": {"netwrk": True}}}, "unknown key"),
        ({"servers": {"bash": {"mode": "sometimes"}}}, "sandbox.servers.bash.mode"),
    ],
)
def test_bad_sandbox_settings_are_config_errors_naming_the_key(tmp_path, table, expected):
    with pytest.raises(ConfigError, match=expected):
        config_from_dict({"sandbox": table}, root=tmp_path)


# -- modes -----------------------------------------------------------------------------------------


def test_off_leaves_the_command_line_and_environment_alone(root):
    prepared = Sandbox(mode="off").prepare(["bash", "-c", "true"], cwd=root, env={"A": "1"})
    assert (prepared.argv, prepared.env) == (["bash", "-c", "true"], {"A": "1"})


def test_required_without_a_mechanism_refuses_saying_how_to_get_one(root):
    config = config_from_dict({"sandbox": {"mode": "required"}}, root=root)
    sb = HostSandbox(config, found=Found(path=None, problem="no bwrap found")).for_server("bash")
    with pytest.raises(ToolError) as caught:
        run(sb, "true", root)
    assert caught.value.code == "sandbox_unavailable"
    assert "no bwrap found" in caught.value.message and "bubblewrap" in caught.value.message


def test_auto_without_a_mechanism_runs_unconfined_and_says_so_loudly(root):
    config = config_from_dict({}, root=root)
    host_sb = HostSandbox(config, found=Found(path=None, problem="no bwrap found"))
    assert not host_sb.for_server("bash").active
    assert "NONE AVAILABLE" in host_sb.describe() and "bubblewrap" in host_sb.describe()
    assert run(host_sb.for_server("bash"), "echo out > /tmp/../" + str(root / "x"), root)[0] == 0


def test_toolkit_runner_uses_the_installed_sandbox_by_default(root, caplog):
    config = config_from_dict({"sandbox": {"mode": "required"}}, root=root)
    sandbox_mod.install(config, found=Found(path=None, problem="nothing here"))
    try:
        assert sandbox_for("bash").mode == "required"
        with pytest.raises(ToolError, match="sandbox_unavailable|no OS sandbox"):
            run_process_sync(["true"], cwd=root, timeout=5)
    finally:
        sandbox_mod.uninstall()
    assert sandbox_for("bash").mode == "off"
    assert run_process_sync(["true"], cwd=root, timeout=5).exit_code == 0
    assert any("unavailable" in record.getMessage() for record in caplog.records)


def test_an_allow_rule_allows_a_contained_part_it_only_half_understands_while_the_sandbox_is_installed(root):
    """The rules learn from the installed sandbox which servers run confined (they never import it)."""
    from entropic_mcp._pipeline._rules import PermissionPart

    config = config_from_dict({"sandbox": {"mode": "required"}, "permissions": {"allow": ["bash.execute"]}}, root=root)
    part = PermissionPart(names=("bash.execute",), store="bash.execute", understood=False, contained=True)

    def judged() -> tuple[str | None, str | None]:
        verdict = PermissionRules(config.permissions).verdict(part, read_only=False)  # new rules: no cache
        return verdict.decision, verdict.kind

    assert judged() == ("ask", "not_understood")
    sandbox_mod.install(config, found=Found(path="/usr/bin/bwrap", version="bubblewrap 0.8.0"))
    try:
        assert judged() == ("allow", "sandboxed")
    finally:
        sandbox_mod.uninstall()
    assert judged() == ("ask", "not_understood")


# -- what the kernel enforces ----------------------------------------------------------------------------


@needs_bwrap
def test_writes_land_only_under_the_root_and_the_private_tmp(root, tmp_path):
    outside = tmp_path / "outside.txt"
    code, out = run(
        host(root).for_server("bash"),
        f'echo in > src/new.txt; echo t > "$TMPDIR/t"; cat "$TMPDIR/t"; echo out > {outside}; touch /etc/sbx-test',
        root,
    )
    assert (root / "src" / "new.txt").read_text() == "in\n"
    assert "t\n" in out
    assert not outside.exists() and not Path("/etc/sbx-test").exists()
    # /tmp inside is the private one: the write outside the root went there, then away
    assert "Read-only file system" in out and code != 0


@needs_bwrap
def test_each_run_has_its_own_tmp_that_is_gone_after_it(root):
    sb = host(root).for_server("bash")
    name = f"entropic-sandbox-test-{os.getpid()}"
    code, out = run(sb, f'echo "$TMPDIR"; echo x > /tmp/{name} && cat /tmp/{name}', root)
    assert code == 0 and out.splitlines() == ["/tmp", "x"]
    assert not Path("/tmp", name).exists()
    code, out = run(sb, f"cat /tmp/{name}", root)
    assert code != 0 and "No such file" in out


@needs_bwrap
def test_policy_files_stay_unchanged_and_missing_ones_are_not_created(root):
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    script = """
        echo '[permissions]' >> entropic-mcp.toml
        printf 'x' > entropic-mcp.local.toml
        echo '{}' > .mcp.json
        echo '*' > .entropicignore
        echo '[core] fsmonitor = x' >> .git/config
        echo 'evil' > .git/hooks/pre-commit
        rm -f entropic-mcp.toml; mv .git/config gone
        python3 -c "open('entropic-mcp.local.toml', 'w').write('[permissions]')"
    """
    run(host(root).for_server("bash"), script, root)
    assert (root / "entropic-mcp.toml").read_text() == "[permissions]\n"
    assert (root / ".git" / "config").read_text() == "[core]\n"
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    # The empty placeholders covering the missing ones last as long as the persistent sandbox.
    sandbox_mod._zygote.POOL.stop_all()
    for name in ("entropic-mcp.local.toml", ".mcp.json", ".entropicignore", "gone"):
        assert not (root / name).exists(), name


@needs_bwrap
def test_the_git_servers_sandbox_may_write_git_config_but_not_hooks(root):
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    sb = host(root).for_server("git").allowing(git_config=True)
    run(sb, "echo '[branch]' >> .git/config; echo x > .git/hooks/post-checkout", root)
    assert (root / ".git" / "config").read_text() == "[core]\n[branch]\n"
    assert not (root / ".git" / "hooks" / "post-checkout").exists()


@needs_bwrap
def test_reads_denied_by_rules_ignore_file_and_settings_are_refused(root):
    (root / ".env").write_text("TOKEN=rule\n", encoding="utf-8")
    (root / "secrets").mkdir()
    (root / "secrets" / "key").write_text("ignored-secret\n", encoding="utf-8")
    (root / ".entropicignore").write_text("secrets/\n", encoding="utf-8")
    (root / "src" / "id.pem").write_text("setting-secret\n", encoding="utf-8")
    sb = host(root, deny_read=["*.pem"], permissions={"deny": ["filesystem.read_file:.env"]}).for_server("bash")
    code, out = run(
        sb,
        "cat .env; cat secrets/key; cat src/id.pem; python3 -c \"print(open('.env').read())\"; "
        "find . -name key -exec cat {} \\;; cp .env /tmp/c && cat /tmp/c; cat src/a.py",
        root,
    )
    for secret in ("rule", "ignored-secret", "setting-secret"):
        assert secret not in out
    assert "print(1)" in out and "Permission denied" in out


@needs_bwrap
def test_write_deny_rules_make_existing_paths_read_only(root):
    (root / "vendor").mkdir()
    (root / "vendor" / "lib.py").write_text("v1\n", encoding="utf-8")
    sb = host(root, permissions={"deny": ["filesystem.write_file:vendor/*"]}).for_server("bash")
    run(sb, "echo v2 > vendor/lib.py; sort -o vendor/lib.py src/a.py; echo ok > src/b.py", root)
    assert (root / "vendor" / "lib.py").read_text() == "v1\n"
    assert (root / "src" / "b.py").read_text() == "ok\n"


@needs_bwrap
def test_the_store_is_neither_readable_nor_writable(root):
    store = root / ".entropic-mcp" / "store"
    store.mkdir(parents=True)
    (store / "tool_calls.jsonl").write_text("conversation-data\n", encoding="utf-8")
    sb = host(root, storage={"path": ".entropic-mcp/store"}).for_server("bash")
    code, out = run(sb, "cat .entropic-mcp/store/tool_calls.jsonl; rm -rf .entropic-mcp", root)
    assert "conversation-data" not in out
    assert (store / "tool_calls.jsonl").read_text() == "conversation-data\n"


@needs_bwrap
def test_no_network_unless_enabled(root):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.settimeout(0.5)
    probe = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('CONNECTED')\""
    )
    try:
        code, out = run(host(root).for_server("bash"), probe + f"; echo > /dev/tcp/127.0.0.1/{port}", root)
        assert "CONNECTED" not in out and code != 0
        with pytest.raises(TimeoutError):
            listener.accept()
        code, out = run(host(root, network=True).for_server("bash"), probe, root)
        assert "CONNECTED" in out
        listener.accept()[0].close()
    finally:
        listener.close()


@needs_bwrap
def test_entropic_mcp_variables_and_the_servers_environment_are_invisible(root):
    env = {**os.environ, "ENTROPIC_MCP_TOKEN": "serve-token-value", "KEEP": "kept"}
    code, out = run(
        host(root).for_server("bash"), "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'", root, env=env
    )
    assert "serve-token-value" not in out and "KEEP=kept" in out


@needs_bwrap
def test_no_new_privileges_and_no_capabilities(root):
    code, out = run(host(root).for_server("bash"), "grep -E '^(NoNewPrivs|CapEff)' /proc/self/status", root)
    assert "NoNewPrivs:\t1" in out and "CapEff:\t0000000000000000" in out


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _gone(marker: str, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive_with(marker):
            return True
        time.sleep(0.05)  # polling the process table for a bounded time, not synchronising
    return False


ESCAPES = {
    "setsid": "setsid sleep {m} & disown; true",
    "double fork": "( ( sleep {m} & ) & ); true",
    "nohup": "nohup sleep {m} >/dev/null 2>&1 & true",
    "setsid double fork": "setsid bash -c '(sleep {m} &) ; true' ; true",
    "python daemon": "python3 -c \"import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0: os.execvp('sleep',['sleep','{m}'])\" ; true",
}


@needs_bwrap
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_no_process_outlives_its_call(root, name):
    marker = f"{4000 + abs(hash(name)) % 1000}.{os.getpid()}"
    code, _ = run(host(root).for_server("bash"), ESCAPES[name].format(m=marker), root)
    assert code == 0
    assert _gone(marker), f"{name}: a process outlived the call"


@needs_bwrap
def test_no_process_outlives_a_server_killed_with_sigkill(root, tmp_path):
    marker = f"5123.{os.getpid()}"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from entropic_mcp._config import config_from_dict
        from entropic_mcp._sandbox import HostSandbox
        from entropic_mcp.toolkit import run_process_sync
        sb = HostSandbox(config_from_dict({{"sandbox": {{"mode": "required"}}}}, root={str(root)!r})).for_server("bash")
        print("started", flush=True)
        run_process_sync(["bash", "-c", "setsid sleep {marker} & (sleep {marker} &); nohup sleep {marker} & sleep {marker}"],
                         cwd={str(root)!r}, timeout=60, sandbox=sb)
        """
    )
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline() == b"started\n"
        end = time.monotonic() + 20
        while len(_alive_with(marker)) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        assert len(_alive_with(marker)) >= 4
        server.send_signal(signal.SIGKILL)
        server.wait()
        assert _gone(marker), "processes outlived the server"
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


@needs_bwrap
def test_timeout_stops_every_process_of_the_sandbox(root):
    marker = f"6123.{os.getpid()}"
    sb = host(root).for_server("bash")

    async def main():
        return await run_process(
            ["bash", "-c", f"setsid sleep {marker} & sleep {marker}"], cwd=root, timeout=1, sandbox=sb, grace=0.5
        )

    done = anyio.run(main)
    assert done.timed_out
    assert _gone(marker)


@needs_bwrap
def test_a_missing_program_is_not_found_as_without_the_sandbox(root):
    with pytest.raises(ToolError) as caught:
        run_process_sync(["no-such-program-xyz"], cwd=root, timeout=5, sandbox=host(root).for_server(None))
    assert caught.value.code == "not_found"


# -- telling the model -----------------------------------------------------------------------------


def _active(**kw: object) -> Sandbox:
    return Sandbox(mode="required", server="bash", found=Found(path="/usr/bin/bwrap"), **kw)  # type: ignore[arg-type]


def test_a_blocked_write_names_the_path_and_the_setting():
    note = blocked_note("touch: cannot touch '/opt/x': Read-only file system\n", _active(), exit_code=1)
    assert note is not None and "'/opt/x'" in note and "[sandbox.servers.bash]" in note and "writable" in note


def test_a_python_blocked_write_is_recognised():
    text = "OSError: [Errno 30] Read-only file system: '/etc/passwd'\n"
    note = blocked_note(text, _active(), exit_code=1)
    assert note is not None and "/etc/passwd" in note


def test_a_refused_connection_says_how_to_enable_the_network():
    note = blocked_note("curl: (6) Could not resolve host: example.com\n", _active(), exit_code=6)
    assert note is not None and "network = true" in note


def test_no_note_for_success_or_without_the_sandbox():
    text = "x: Read-only file system\n"
    assert blocked_note(text, _active(), exit_code=0) is None
    assert blocked_note(text, Sandbox(mode="off"), exit_code=1) is None
    assert blocked_note("all fine\n", _active(), exit_code=1) is None


@needs_bwrap
def test_a_glob_deny_rule_hides_matches_at_any_depth(root):
    deep = root / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "id.key").write_text("deep-secret\n", encoding="utf-8")
    (deep / "ok.txt").write_text("visible\n", encoding="utf-8")
    sb = host(root, permissions={"deny": ["filesystem.read_file:*.key"]}).for_server("bash")
    code, out = run(sb, "cat a/b/c/id.key; cat a/b/c/ok.txt", root)
    assert "deep-secret" not in out and "visible" in out


@needs_bwrap
def test_a_read_deny_rule_naming_a_file_outside_the_root_hides_it(root):
    import shutil
    import tempfile

    base = Path.home() / ".cache"
    base.mkdir(parents=True, exist_ok=True)
    elsewhere = Path(tempfile.mkdtemp(prefix="entropic-sandbox-test-", dir=base))  # not under /tmp
    try:
        secret = elsewhere / "token.txt"
        secret.write_text("outside-secret\n", encoding="utf-8")
        (elsewhere / "plain.txt").write_text("plain-text\n", encoding="utf-8")
        sb = host(root, permissions={"deny": [f"filesystem.read_file:{secret}"]}).for_server("bash")
        code, out = run(sb, f"cat {secret}; cat {elsewhere}/plain.txt", root)
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert "outside-secret" not in out and "plain-text" in out


def test_the_host_interpreter_under_tmp_stays_visible_inside(tmp_path, monkeypatch):
    """A virtual environment or checkout under /tmp (CI clones, test runs): inside, /tmp is a
    private tmpfs, so the interpreter and its import path are bound in read-only — the persistent
    sandbox's spawner and external servers run sys.executable (they found nothing before)."""
    from entropic_mcp._sandbox._sandbox import _host_python_under_tmp

    venv = Path(tempfile.mkdtemp(prefix="venv-", dir="/tmp"))
    try:
        monkeypatch.setattr(sys, "prefix", str(venv))
        monkeypatch.setattr(sys, "path", [*sys.path, str(venv / "missing")])
        found = _host_python_under_tmp()
        assert venv in found and venv / "missing" not in found
        assert all(path.parts[1] == "tmp" for path in found)
    finally:
        venv.rmdir()
