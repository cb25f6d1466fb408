"""Config: every value is checked against its field's type hint, from any source."""

from __future__ import annotations

import typing
from dataclasses import fields
from pathlib import Path

import pytest

from agentd.foundation.config import Config, PermissionMode, describe
from agentd.foundation.errors import ConfigError
from agentd.sessions.session import PERMISSION_MODES


def _wrong_value(hint: object) -> object:
    """A value of the wrong type for `hint`: what a slip in a TOML file gives."""
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    if typing.get_origin(base) is list:
        return "/a/string/not/a/list"
    if base in (int, float):
        return True  # a bool is an int to Python; never to a setting
    return 5  # a number where a string (or one of some strings) belongs


@pytest.mark.parametrize("name", [f.name for f in fields(Config)])
def test_every_setting_refuses_a_value_of_the_wrong_type(name: str) -> None:
    """Walks every field, so a setting added later is covered without a new test."""
    hint = typing.get_type_hints(Config, include_extras=True)[name]
    with pytest.raises(ConfigError) as err:
        Config(**{name: _wrong_value(hint)})
    message = str(err.value)
    assert f"setting {name}" in message and "expected" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('trusted_workspaces = "/src/mine"', "trusted_workspaces"),
        ('trusted_settings = "/src/mine"', "trusted_settings"),
        ('allow_rules = "Bash"', "allow_rules"),
        ("allow_rules = [1, 2]", "allow_rules"),
        ("bash_processes = true", "bash_processes"),
        ("bash_processes = -1", "an integer > 0"),
        ("bash_memory_bytes = 0", "bash_memory_bytes"),
        ("max_message_bytes = 1e6", "max_message_bytes"),
        ("sandbox_uid = -1", "sandbox_uid"),
        ("sandbox_uid = 99999999999", "sandbox_uid"),
        ("permission_timeout_seconds = -5", "a number > 0"),
        ("permission_timeout_seconds = nan", "permission_timeout_seconds"),
        ('permission_timeout_seconds = "60"', "permission_timeout_seconds"),
        ('default_permission_mode = "yolo"', "one of 'default'"),
        ('default_permission_mode = "bypasspermissions"', "default_permission_mode"),
        ('tcp_listen = "7777"', "host:port"),
        ('tcp_listen = "127.0.0.1:0"', "host:port"),
        ('tcp_listen = "127.0.0.1:http"', "host:port"),
        ("tcp_listen = 7777", "tcp_listen"),
        ('log_level = "LOUD"', "log_level"),
        ('webfetch_allow_private_hosts = "localhost"', "webfetch_allow_private_hosts"),
        ('webfetch_allow_private_hosts = ["a host"]', "webfetch_allow_private_hosts"),
        ('socket_path = ["/a"]', "socket_path"),
        ("[trusted_workspaces]\npath = '/x'", "trusted_workspaces"),
    ],
)
def test_bad_toml_values_are_one_line_errors_naming_the_key(
    tmp_path: Path, toml: str, says: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError) as err:
        Config.load(str(path))
    message = str(err.value)
    assert says in message
    assert str(path) in message  # where the bad value came from
    assert "\n" not in message


def test_flags_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="setting log_level from --log-level"):
        Config.load(None, log_level="loud")


def test_good_values_load(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'trusted_settings = [{path = "/src/mine/.claude/settings.json", sha256 = "ab"}]\n'
        "permission_timeout_seconds = 5\n"  # an integer is a fine number of seconds
        'log_level = "debug"\n'
        'webfetch_allow_private_hosts = ["wiki.corp", "10.1.0.0/16", "[::1]", "Intra.Net."]\n'
        'tcp_listen = "[::1]:7777"\ntls_cert = "c"\ntls_key = "k"\ntoken = "t"\n'
    )
    config = Config.load(str(path))
    assert config.trusted_settings == [{"path": "/src/mine/.claude/settings.json", "sha256": "ab"}]
    assert config.permission_timeout_seconds == 5.0
    assert config.log_level == "DEBUG"
    assert config.webfetch_allow_private_hosts == ["wiki.corp", "10.1.0.0/16", "::1", "intra.net"]


def test_tcp_needs_tls_and_token() -> None:
    with pytest.raises(ConfigError, match="tcp_listen needs tls_cert, tls_key and token"):
        Config(tcp_listen="127.0.0.1:7777")


def test_unknown_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("trusted_workspace = ['/x']\n")  # a typo must not be ignored
    with pytest.raises(ConfigError, match="unknown settings .*trusted_workspace"):
        Config.load(str(path))


def test_permission_modes_agree_with_sessions() -> None:
    assert set(typing.get_args(PermissionMode)) == set(PERMISSION_MODES)


def test_descriptions_read_as_words() -> None:
    hints = typing.get_type_hints(Config, include_extras=True)
    assert describe(hints["allow_rules"]) == "a list of strings"
    assert describe(hints["bash_processes"]) == "an integer > 0"
    assert describe(hints["sandbox_uid"]) == "an integer >= 0"
