"""Which servers to relay: the ``mcpServers`` JSON and the command line's one-server forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

from diverge_notifications.bridge import (
    ConfigError,
    ServerSpec,
    load_mcp_config,
    parse_env_pair,
    parse_header_line,
    parse_mcp_config,
    server_specs,
)


def config(servers: Any) -> str:
    return json.dumps({"mcpServers": servers})


def test_a_config_as_mcp_clients_write_it() -> None:
    specs = parse_mcp_config(
        config(
            {
                "everything": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-everything"],
                    "env": {"API_KEY": "k"},
                    "description": "ignored, as other members are",
                },
                "remote": {
                    "type": "http",
                    "url": "https://mcp.example.test/mcp",
                    "headers": {"Authorization": "Bearer  t "},
                },
                "local": {"type": "stdio", "command": "python", "cwd": "/srv", "env": None},
                "other": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
                "off": {"command": "never-started", "disabled": True},
            }
        )
    )
    assert specs == (
        ServerSpec(
            name="everything",
            command=("npx", "-y", "@modelcontextprotocol/server-everything"),
            env={"API_KEY": "k"},
        ),
        ServerSpec(
            name="remote",
            url="https://mcp.example.test/mcp",
            headers={"Authorization": "Bearer  t"},
        ),
        ServerSpec(name="local", command=("python",), cwd="/srv"),
        ServerSpec(name="other", url="http://127.0.0.1:9/mcp"),
    )
    assert [spec.transport for spec in specs] == ["stdio", "http", "stdio", "http"]
    assert all(spec.mode == "auto" and spec.resources is None for spec in specs)


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"a": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}, "MCP server 'a', 'type': the "),
        ({"a": {"type": "websocket", "url": "ws://x"}}, "MCP server 'a', 'type': unknown type"),
        ({"a": {"type": 3, "command": "x"}}, "MCP server 'a', 'type': must be a string"),
        ({"a": {"type": "stdio", "url": "http://x"}}, "'a', 'command': type 'stdio' needs"),
        ({"a": {"type": "http", "command": "x"}}, "'a', 'url': type 'http' needs a url"),
        ({"a": {"command": "x", "url": "http://h/mcp"}}, "'a': has both command and url"),
        ({"a": {"args": ["x"]}}, "'a': needs a command (stdio) or a url"),
        ({"a": []}, "'a': must be an object, not an array"),
        ({"a": {"command": ""}}, "'a', 'command': must not be empty"),
        ({"a": {"command": 7}}, "'a', 'command': must be a string, not a number"),
        ({"a": {"command": "x", "args": "-v"}}, "'a', 'args': must be an array of strings"),
        ({"a": {"command": "x", "args": ["-v", 2]}}, "'a', 'args[1]': must be a string"),
        ({"a": {"command": "x", "env": {"K": 1}}}, "'a', 'env.K': must be a string"),
        ({"a": {"command": "x", "env": ["K=1"]}}, "'a', 'env': must be an object of strings"),
        ({"a": {"command": "x", "env": {"K=V": "1"}}}, "'a', 'env': 'K=V' is not a variable"),
        ({"a": {"command": "x", "cwd": 1}}, "'a', 'cwd': must be a string"),
        ({"a": {"command": "x", "headers": {}}}, "'a', 'headers': applies to url servers"),
        ({"a": {"url": "http://h/mcp", "env": {}}}, "'a', 'env': applies to command servers"),
        ({"a": {"url": "ftp://h/mcp"}}, "'a', 'url': must be an http:// or https:// URL"),
        ({"a": {"url": "http://h:99999/mcp"}}, "'a', 'url': not a URL"),
        ({"a": {"url": "http://h/a b"}}, "'a', 'url': must not contain spaces"),
        ({"a": {"url": "http://h/", "headers": {"A B": "1"}}}, "'headers': 'A B' is not a header"),
        ({"a": {"url": "http://h/", "headers": {"A": "x\ny"}}}, "'a', 'headers.A': must be"),
        ({"a": {"command": "x", "disabled": "yes"}}, "'a', 'disabled': must be true or false"),
        ({"a": {"command": "x", "disabled": True}}, "names no server"),
        ({}, "names no server"),
        ({"": {"command": "x"}}, "a server name must not be empty"),
    ],
)
def test_what_is_wrong_is_named(servers: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_mcp_config(config(servers))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"", "not JSON"),
        (b"\xff{}", "not JSON"),
        (b'{"mcpServers": {"a": {"command": "x"}}', "not JSON"),
        (b"[]", "must be a JSON object, not an array"),
        (b"{}", "needs an object 'mcpServers' (missing)"),
        (b'{"mcpServers": [1]}', "needs an object 'mcpServers' (an array)"),
        (b'{"mcpServers": {"a": {"command": "x", "args": [NaN]}}}', "not JSON"),
    ],
)
def test_what_is_not_a_config(text: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match="the configuration") as caught:
        parse_mcp_config(text)
    assert message in str(caught.value)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_member = st.sampled_from(
    ["type", "command", "args", "env", "cwd", "url", "headers", "disabled", "x"]
)
_entry = st.dictionaries(
    _member, _json | st.sampled_from(["stdio", "http", "sse", "http://h/mcp", "x"]), max_size=5
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _entry | _json, max_size=3) | _json)
def test_parsing_is_total(servers: Any) -> None:
    try:
        specs = parse_mcp_config(config(servers))
    except ConfigError:
        return
    assert specs and all(isinstance(spec, ServerSpec) for spec in specs)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_parsing_bytes_is_total(data: bytes) -> None:
    with pytest.raises(ConfigError):
        parse_mcp_config(data)


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(config({"a": {"command": "x"}}))
    assert load_mcp_config(path) == (ServerSpec(name="a", command=("x",)),)
    path.write_text(config({"a": {"command": 1}}))
    with pytest.raises(ConfigError, match=f"^{path}: MCP server 'a', 'command'"):
        load_mcp_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "missing.json")


# --- the one-server forms ----------------------------------------------------------


def test_the_options_of_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(config({"python -m srv": {"command": "python"}}))
    specs = server_specs(
        config=path,
        stdio=["python -m srv", "node 'my server.js'"],
        urls=["http://127.0.0.1:8765/mcp"],
        env=["TOKEN=a=b", "EMPTY="],
        headers=["Authorization:  Bearer t ", "X-Team: blue"],
        resources=["demo://clock"],
        mode="legacy",
    )
    assert specs == (
        ServerSpec(name="python -m srv", command=("python",)),
        ServerSpec(
            name="python -m srv (2)",
            command=("python", "-m", "srv"),
            env={"TOKEN": "a=b", "EMPTY": ""},
            resources=("demo://clock",),
            mode="legacy",
        ),
        ServerSpec(
            name="node 'my server.js'",
            command=("node", "my server.js"),
            env={"TOKEN": "a=b", "EMPTY": ""},
            resources=("demo://clock",),
            mode="legacy",
        ),
        ServerSpec(
            name="http://127.0.0.1:8765/mcp",
            url="http://127.0.0.1:8765/mcp",
            headers={"Authorization": "Bearer t", "X-Team": "blue"},
            resources=("demo://clock",),
            mode="legacy",
        ),
    )
    assert server_specs() == ()


def test_a_url_with_credentials_is_not_a_name() -> None:
    (spec,) = server_specs(urls=["https://user:secret@mcp.example.test/mcp?key=k"])
    assert spec.name == "https://mcp.example.test/mcp"
    assert spec.url == "https://user:secret@mcp.example.test/mcp?key=k"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"env": ["A=1"]}, "--mcp-env: applies to --mcp-stdio servers"),
        ({"urls": ["http://h/"], "env": ["A=1"]}, "--mcp-env: applies to --mcp-stdio"),
        ({"stdio": ["x"], "headers": ["A: 1"]}, "--mcp-header: applies to --mcp-url"),
        ({"resources": ["u"]}, "--mcp-resource: applies to --mcp-stdio and --mcp-url"),
        ({"mode": "auto"}, "--mcp-mode: applies to --mcp-stdio and --mcp-url"),
        ({"stdio": ["x"], "mode": "fast"}, "mode must be one of auto, listen, legacy"),
        ({"stdio": ["x"], "env": ["NOEQUALS"]}, "--mcp-env: 'NOEQUALS' is not NAME=VALUE"),
        ({"stdio": ["x"], "env": ["=v"]}, "--mcp-env: '=v' is not NAME=VALUE"),
        ({"urls": ["http://h/"], "headers": ["A"]}, "--mcp-header: 'A' is not 'Name: value'"),
        ({"urls": ["http://h/"], "headers": ["A B: 1"]}, "is not 'Name: value'"),
        ({"urls": ["http://h/"], "headers": ["A: é"]}, "visible ASCII"),
        ({"stdio": [""]}, "the command is empty"),
        ({"stdio": ["'unclosed"]}, "cannot split the command"),
        ({"urls": ["127.0.0.1:8080"]}, "must be an http:// or https:// URL"),
        ({"stdio": ["x"], "resources": [""]}, "resource URIs must be non-empty strings"),
    ],
)
def test_options_that_cannot_be_used(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        server_specs(**options)
    assert message in str(caught.value)


def test_pairs_and_header_lines() -> None:
    assert parse_env_pair("K=") == ("K", "")
    assert parse_env_pair("K==v") == ("K", "=v")
    assert parse_header_line("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    assert parse_header_line("X-Empty:") == ("X-Empty", "")


def test_a_spec_is_checked_when_built() -> None:
    with pytest.raises(ConfigError, match="give exactly one of a command and a url"):
        ServerSpec(name="a")
    with pytest.raises(ConfigError, match="a server needs a non-empty name"):
        ServerSpec(name="", command=("x",))
    with pytest.raises(ConfigError, match="'a': mode must be one of"):
        ServerSpec.stdio("a", "x", mode="2026-07-28")
    assert ServerSpec.stdio("a", ["x", "--y"]) == ServerSpec(name="a", command=("x", "--y"))
