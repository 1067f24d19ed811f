import json

import pluggy
import pytest
from click.testing import CliRunner
from entropic_mcp import ConfigError, PluginError, PluginLoadWarning, Plugins, ServerManager, config_from_dict
from entropic_mcp.cli import cli


def load(tmp_path, names, *, strict=False):
    config = config_from_dict(
        {"entropic_mcp": {"plugins": names}, "storage": {"backend": "none"}, "permissions": {"allow_read": True}},
        root=tmp_path,
    )
    plugins = Plugins(strict=strict)
    plugins.load_entry_points(config.plugins)
    return config, plugins


def test_working_plugin_is_active_with_its_distribution_and_server(fake_site, tmp_path):
    config, plugins = load(tmp_path, ["fakegood"])
    manager = ServerManager.from_config(config, plugins=plugins)
    info = plugins.infos["fakegood"]
    assert (info.status, info.distribution, info.version) == ("active", "fake-good", "1.0")
    assert info.servers == ("good",)
    assert "entropic_mcp_servers" in info.hooks
    assert [t["name"] for t in manager.list_tools()] == ["good.ping"]


def test_broken_import_is_recorded_and_the_others_still_work(fake_site, tmp_path):
    with pytest.warns(PluginLoadWarning, match="fakebroken"):
        config, plugins = load(tmp_path, ["fakegood", "fakebroken"])
    assert plugins.infos["fakebroken"].status == "failed"
    assert "entropic_mcp_no_such_dependency" in plugins.infos["fakebroken"].error
    assert plugins.infos["fakebroken"].distribution == "fake-broken"
    manager = ServerManager.from_config(config, plugins=plugins)
    assert manager.call_sync("good.ping").response.result == "pong"


def test_broken_import_is_fatal_in_strict_mode(fake_site, tmp_path):
    with pytest.raises(PluginError, match="fakebroken.*import failed"):
        load(tmp_path, ["fakegood", "fakebroken"], strict=True)


def test_strict_mode_comes_from_the_environment(fake_site, tmp_path, monkeypatch):
    monkeypatch.setenv("ENTROPIC_MCP_STRICT_PLUGINS", "1")
    config = config_from_dict({"entropic_mcp": {"plugins": ["fakebroken"]}}, root=tmp_path)
    with pytest.raises(PluginError):
        Plugins().load_entry_points(config.plugins)


def test_raising_registration_hook_is_recorded_and_skipped(fake_site, tmp_path):
    config, plugins = load(tmp_path, ["fakegood", "fakeraising"])
    with pytest.warns(PluginLoadWarning, match="cannot start the raising server"):
        manager = ServerManager.from_config(config, plugins=plugins)
    assert plugins.infos["fakeraising"].status == "failed"
    assert list(manager.servers) == ["good"]


def test_unknown_hook_fails_the_plugin(fake_site, tmp_path):
    with pytest.warns(PluginLoadWarning, match="unknown hook.*entropic_mcp_server"):
        _, plugins = load(tmp_path, ["fakeunknown", "fakegood"])
    assert plugins.infos["fakeunknown"].status == "failed"
    assert plugins.infos["fakegood"].status == "active"


def test_duplicate_server_names_fail_every_claimant_naming_all_providers(fake_site, tmp_path):
    config, plugins = load(tmp_path, ["fakedupa", "fakedupb", "fakegood"])
    with pytest.warns(PluginLoadWarning) as warned:
        manager = ServerManager.from_config(config, plugins=plugins)
    assert "dup" not in manager.servers and "good" in manager.servers  # the others keep working
    for name in ("fakedupa", "fakedupb"):
        info = plugins.infos[name]
        assert info.status == "failed"
        assert "'dup'" in info.error and "fake-dup-a" in info.error and "fake-dup-b" in info.error
    assert len(warned) == 2


def test_duplicate_server_names_are_an_error_in_strict_mode(fake_site, tmp_path):
    config, plugins = load(tmp_path, ["fakedupa", "fakedupb"])
    plugins.strict = True
    with pytest.raises(PluginError) as excinfo:
        ServerManager.from_config(config, plugins=plugins)
    assert "'dup'" in str(excinfo.value)


def test_blocked_plugin_is_never_imported(fake_site, tmp_path, monkeypatch):
    monkeypatch.setenv("ENTROPIC_MCP_DISABLED_PLUGINS", "fakeblocked, other")
    _, plugins = load(tmp_path, ["fakegood", "fakeblocked"], strict=True)
    assert plugins.infos["fakeblocked"].status == "disabled"
    assert "ENTROPIC_MCP_DISABLED_PLUGINS" in plugins.infos["fakeblocked"].error


def test_plugins_not_in_config_are_disabled_not_imported(fake_site, tmp_path):
    _, plugins = load(tmp_path, ["fakegood"], strict=True)
    assert plugins.infos["fakeblocked"].status == "disabled"
    assert plugins.infos["fakebroken"].status == "disabled"


def test_enabled_but_missing_first_party_plugin_names_the_distribution(fake_site, tmp_path, monkeypatch):
    monkeypatch.setattr("entropic_mcp._plugins.FIRST_PARTY", ("gitlike",))
    config = config_from_dict({"entropic_mcp": {"plugins": ["gitlike"]}}, root=tmp_path)
    with pytest.raises(ConfigError, match="pip install entropic-mcp-gitlike"):
        Plugins().load_entry_points(config.plugins)


def test_enabled_but_missing_plugin_is_a_config_error(fake_site, tmp_path):
    config = config_from_dict({"entropic_mcp": {"plugins": ["nosuchplugin"]}}, root=tmp_path)
    with pytest.raises(ConfigError, match="'nosuchplugin' enabled in config but not installed"):
        Plugins().load_entry_points(config.plugins)


def test_cli_lists_failed_plugin_beside_working_one(fake_site, tmp_path, monkeypatch):
    monkeypatch.delenv("ENTROPIC_MCP_STRICT_PLUGINS", raising=False)
    (tmp_path / "entropic-mcp.toml").write_text('[entropic_mcp]\nplugins = ["fakegood", "fakebroken"]\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plugins", "--json"], obj={})
    assert result.exit_code == 0, result.output
    listing = {p["name"]: p for p in json.loads(result.stdout)}
    assert listing["fakegood"]["status"] == "active"
    assert listing["fakebroken"]["status"] == "failed"
    assert "import failed" in listing["fakebroken"]["error"]


def test_cli_strict_mode_fails_the_start_with_the_error(fake_site, tmp_path, monkeypatch):
    monkeypatch.setenv("ENTROPIC_MCP_STRICT_PLUGINS", "1")
    (tmp_path / "entropic-mcp.toml").write_text('[entropic_mcp]\nplugins = ["fakegood", "fakebroken"]\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["plugins", "--json"], obj={})
    assert result.exit_code != 0
    assert isinstance(result.exception, PluginError)
    assert "fakebroken" in str(result.exception)


def test_builtins_are_listed_with_all(fake_site, tmp_path):
    _, plugins = load(tmp_path, ["fakegood"])
    names = [p.name for p in plugins.listing(include_builtins=True)]
    assert "builtin-delegation" in names and "builtin-tinydb" in names
    assert "builtin-tinydb" not in [p.name for p in plugins.listing()]


def test_a_misspelled_server_table_is_an_error_at_load_naming_file_and_key(fake_site, tmp_path):
    config = config_from_dict(
        {"entropic_mcp": {"plugins": ["fakegood"]}, "storage": {"backend": "none"}, "servers": {"goood": {}}},
        root=tmp_path,
    )
    plugins = Plugins()
    plugins.load_entry_points(config.plugins)
    with pytest.raises(ConfigError) as excinfo:
        ServerManager.from_config(config, plugins=plugins)
    assert "[servers.goood]" in str(excinfo.value) and "did you mean [servers.good]" in str(excinfo.value)
    # A host that adds servers of its own later checks nothing yet.
    ServerManager.from_config(config, plugins=plugins, check_config=False).close()


def test_an_unknown_storage_backend_is_an_error_at_load_not_at_first_use(fake_site, tmp_path):
    config = config_from_dict(
        {"entropic_mcp": {"plugins": ["fakegood"]}, "storage": {"backend": "tinydbb"}}, root=tmp_path
    )
    plugins = Plugins()
    plugins.load_entry_points(config.plugins)
    with pytest.raises(ConfigError) as excinfo:
        ServerManager.from_config(config, plugins=plugins)
    assert "'tinydbb'" in str(excinfo.value) and "did you mean 'tinydb'" in str(excinfo.value)


def test_two_plugins_offering_one_storage_backend_name_is_an_error_naming_both(tmp_path):
    from entropic_mcp import hookimpl
    from entropic_mcp.storage import StorageBackendSpec
    from entropic_mcp.testing import MemoryStorage

    class Twin:
        @hookimpl
        def entropic_mcp_storage_backends(self):
            return StorageBackendSpec(name="tinydb", factory=lambda config: MemoryStorage())

    config = config_from_dict({"storage": {"backend": "tinydb"}}, root=tmp_path)
    plugins = Plugins()
    plugins.register(Twin(), "twin")
    with pytest.raises(ConfigError) as excinfo:
        ServerManager.from_config(config, plugins=plugins, load_entry_points=False)
    assert "builtin-tinydb" in str(excinfo.value) and "twin" in str(excinfo.value)


class _Wrapping:
    """A plugin that wraps the before-call hook and also implements a plain one."""

    ran: list[str] = []

    @pluggy.HookimplMarker("entropic_mcp")(wrapper=True)
    def entropic_mcp_before_tool_call(self, call):
        self.ran.append("wrapper")
        return (yield)

    @pluggy.HookimplMarker("entropic_mcp")
    def entropic_mcp_after_tool_call(self, call, outcome):
        self.ran.append("after")


class _OldStyleWrapping:
    @pluggy.HookimplMarker("entropic_mcp")(hookwrapper=True)
    def entropic_mcp_after_tool_call(self, call, outcome):
        yield


@pytest.mark.parametrize("plugin", [_Wrapping(), _OldStyleWrapping()], ids=["wrapper", "hookwrapper"])
def test_a_hook_wrapper_fails_its_plugin_at_registration_saying_what_to_do(plugin, tmp_path):
    plugins = Plugins(strict=False)
    with pytest.warns(PluginLoadWarning, match="as a hook wrapper .* never runs.*Implement the hook plainly"):
        assert plugins.register(plugin, "wrapping") is False
    info = plugins.infos["wrapping"]
    assert info.status == "failed" and "entropic_mcp_" in info.error
    assert plugins.pm.get_plugin("wrapping") is None  # nothing of it is left half-registered
    assert "wrapping" not in {name for name, _ in plugins.implementations("entropic_mcp_after_tool_call")}


def test_a_hook_wrapper_is_an_error_in_strict_mode():
    with pytest.raises(PluginError, match="hook wrapper"):
        Plugins(strict=True).register(_Wrapping(), "wrapping")
