"""Which MCP servers to relay: the ``mcpServers`` configuration and the one-server forms.

MCP clients describe their servers as ``{"mcpServers": {name: entry}}``, an
entry being ``{"command", "args", "env", "cwd"}`` (a program speaking MCP on
its standard input and output) or ``{"url", "headers"}`` (a Streamable HTTP
endpoint), with an optional ``"type"``. :func:`parse_mcp_config` turns that
JSON into :class:`ServerSpec` values; :func:`server_specs` builds them from
the command line's options as well. Everything here is pure: no file is read
except by :func:`load_mcp_config` and :func:`server_specs` (the
configuration file), and no environment is looked at.

Every failure is a :class:`ConfigError` whose message names the server and
the member at fault.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from ..sansio.mcp.json import JsonError, parse
from ..sansio.mcp.model import _json_type

__all__ = [
    "HTTP_TYPES",
    "MAX_CONFIG_SIZE",
    "MODES",
    "ConfigError",
    "ServerSpec",
    "load_mcp_config",
    "parse_env_pair",
    "parse_header_line",
    "parse_mcp_config",
    "server_specs",
]

#: How a server is asked for what there is to hear (see ``docs/relay.md``).
MODES: Final = ("auto", "listen", "legacy")
#: The ``type`` values of a Streamable HTTP entry, as MCP clients spell them.
HTTP_TYPES: Final = ("http", "streamable-http", "streamableHttp")
#: The largest configuration file read, in bytes.
MAX_CONFIG_SIZE: Final = 1024 * 1024

_STDIO_MEMBERS: Final = ("command", "args", "env", "cwd")
_HTTP_MEMBERS: Final = ("url", "headers")
# RFC 9110 field names are tokens; values are kept to visible ASCII, space
# and tab, which every HTTP stack sends unchanged.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")


class ConfigError(ValueError):
    """A server configuration that cannot be used.

    ``server`` is the server's name and ``field`` the member (or option) at
    fault, when there is one; the message says both, for people.
    """

    def __init__(self, message: str, *, server: str | None = None, field: str | None = None):
        where = ""
        if server is not None:
            where = f"MCP server {server!r}: "
            if field is not None:
                where = f"MCP server {server!r}, {field!r}: "
        elif field is not None:
            where = f"{field}: "
        super().__init__(where + message)
        self.server = server
        self.field = field


def _check_text(server: str, field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, not {_json_type(value)}", server=server, field=field)
    if "\x00" in value:
        raise ConfigError("must not contain a NUL character", server=server, field=field)
    return value


def _check_env(server: str, env: Mapping[str, str]) -> None:
    for key, value in env.items():
        _check_text(server, "env", key)
        if not key or "=" in key:
            raise ConfigError(
                f"{key!r} is not a variable name (non-empty, no '=')", server=server, field="env"
            )
        _check_text(server, f"env.{key}", value)


def _check_headers(server: str, headers: Mapping[str, str]) -> None:
    for key, value in headers.items():
        if not isinstance(key, str) or not _TOKEN.fullmatch(key):
            raise ConfigError(f"{key!r} is not a header name", server=server, field="headers")
        if not isinstance(value, str) or not _FIELD_VALUE.fullmatch(value):
            raise ConfigError(
                "must be a string of visible ASCII characters, spaces and tabs",
                server=server,
                field=f"headers.{key}",
            )


def _check_url(server: str, url: object) -> str:
    text = _check_text(server, "url", url)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as error:
        raise ConfigError(f"not a URL: {error}", server=server, field="url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"must be an http:// or https:// URL with a host, not {text!r}",
            server=server,
            field="url",
        )
    if any(character.isspace() or ord(character) < 0x20 for character in text):
        raise ConfigError(
            "must not contain spaces or control characters", server=server, field="url"
        )
    return text


def _frozen_mapping(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


def _header_map(value: Mapping[str, str] | None) -> dict[str, str]:
    # Space around a field value is not part of it (RFC 9110, section 5.5).
    return {
        key: item.strip(" \t") if isinstance(item, str) else item
        for key, item in (value or {}).items()
    }


def _argv(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


def _resource_tuple(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class ServerSpec:
    """One MCP server to relay.

    A stdio server has a ``command`` (the program and its arguments, at
    least one element), and optionally ``env`` (added to the safe default
    environment, see ``docs/relay.md``) and ``cwd``. A Streamable HTTP
    server has a ``url`` and optionally ``headers`` sent with every request.
    ``resources`` are the URIs to subscribe to (``None``: every resource the
    server lists); ``mode`` is one of :data:`MODES`.

    Built with :meth:`stdio` or :meth:`http`, or by the parsers of this
    module; an inconsistent spec raises :class:`ConfigError`.
    """

    name: str
    command: tuple[str, ...] = attrs.field(default=(), converter=_argv)
    env: dict[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict, converter=_header_map)
    resources: tuple[str, ...] | None = attrs.field(default=None, converter=_resource_tuple)
    mode: str = "auto"

    def __attrs_post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name:
            raise ConfigError("a server needs a non-empty name")
        if bool(self.command) == (self.url is not None):
            raise ConfigError("give exactly one of a command and a url", server=name)
        for index, part in enumerate(self.command):
            _check_text(name, "command" if index == 0 else f"args[{index - 1}]", part)
        if self.command and not self.command[0]:
            raise ConfigError("must not be empty", server=name, field="command")
        if self.url is not None:
            _check_url(name, self.url)
            if self.env or self.cwd is not None:
                raise ConfigError(
                    "env and cwd apply to command servers, not url ones", server=name, field="env"
                )
        elif self.headers:
            raise ConfigError(
                "headers apply to url servers, not command ones", server=name, field="headers"
            )
        _check_env(name, self.env)
        _check_headers(name, self.headers)
        if self.cwd is not None:
            _check_text(name, "cwd", self.cwd)
        for uri in self.resources or ():
            if not isinstance(uri, str) or not uri:
                raise ConfigError("resource URIs must be non-empty strings", server=name)
        if self.mode not in MODES:
            raise ConfigError(
                f"mode must be one of {', '.join(MODES)}, not {self.mode!r}", server=name
            )

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command else "http"

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        resources: Sequence[str] | None = None,
        mode: str = "auto",
    ) -> ServerSpec:
        """A server started as ``command``: a shell-style string or an argument list."""
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError as error:
                raise ConfigError(f"cannot split the command: {error}", server=name) from None
        else:
            argv = list(command)
        if not argv:
            raise ConfigError("the command is empty", server=name, field="command")
        return cls(name=name, command=argv, env=env, cwd=cwd, resources=resources, mode=mode)

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        resources: Sequence[str] | None = None,
        mode: str = "auto",
    ) -> ServerSpec:
        """A Streamable HTTP server at ``url``."""
        return cls(name=name, url=url, headers=headers, resources=resources, mode=mode)


# --- the mcpServers JSON ---------------------------------------------------------


def _string_map(server: str, field: str, value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"must be an object of strings, not {_json_type(value)}", server=server, field=field
        )
    for key, item in value.items():
        if not isinstance(item, str):
            raise ConfigError(
                f"must be a string, not {_json_type(item)}", server=server, field=f"{field}.{key}"
            )
    return dict(value)


def _entry_type(name: str, entry: dict[str, Any]) -> str:
    kind = entry.get("type")
    has_command = "command" in entry
    has_url = "url" in entry
    if kind is None:
        if has_command and has_url:
            raise ConfigError("has both command and url: give one", server=name)
        if not has_command and not has_url:
            raise ConfigError("needs a command (stdio) or a url (Streamable HTTP)", server=name)
        return "stdio" if has_command else "http"
    if not isinstance(kind, str):
        raise ConfigError(f"must be a string, not {_json_type(kind)}", server=name, field="type")
    if kind == "sse":
        raise ConfigError(
            "the HTTP+SSE transport (MCP 2024-11-05) is not supported: "
            "give the server's Streamable HTTP endpoint with type 'http'",
            server=name,
            field="type",
        )
    if kind == "stdio":
        if not has_command:
            raise ConfigError("type 'stdio' needs a command", server=name, field="command")
        return "stdio"
    if kind in HTTP_TYPES:
        if not has_url:
            raise ConfigError(f"type {kind!r} needs a url", server=name, field="url")
        return "http"
    known = ", ".join(repr(k) for k in ("stdio", *HTTP_TYPES))
    raise ConfigError(f"unknown type {kind!r} (known: {known})", server=name, field="type")


def _entry(name: str, entry: object) -> ServerSpec | None:
    if not isinstance(entry, dict):
        raise ConfigError(f"must be an object, not {_json_type(entry)}", server=name)
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ConfigError(
            f"must be true or false, not {_json_type(disabled)}", server=name, field="disabled"
        )
    if disabled:
        return None
    if _entry_type(name, entry) == "stdio":
        for member in _HTTP_MEMBERS:
            if member in entry:
                raise ConfigError("applies to url servers only", server=name, field=member)
        command = _check_text(name, "command", entry["command"])
        args = entry.get("args")
        if args is None:
            args = []
        if not isinstance(args, list):
            raise ConfigError(
                f"must be an array of strings, not {_json_type(args)}", server=name, field="args"
            )
        for index, arg in enumerate(args):
            _check_text(name, f"args[{index}]", arg)
        cwd = entry.get("cwd")
        if cwd is not None:
            _check_text(name, "cwd", cwd)
        if not command:
            raise ConfigError("must not be empty", server=name, field="command")
        return ServerSpec(
            name=name,
            command=[command, *args],
            env=_string_map(name, "env", entry.get("env")),
            cwd=cwd,
        )
    for member in _STDIO_MEMBERS:
        if member in entry:
            raise ConfigError("applies to command servers only", server=name, field=member)
    return ServerSpec(
        name=name,
        url=_check_url(name, entry["url"]),
        headers=_string_map(name, "headers", entry.get("headers")),
    )


def parse_mcp_config(data: str | bytes) -> tuple[ServerSpec, ...]:
    """The servers of an ``mcpServers`` configuration, in the order written.

    ``data`` is the JSON text (UTF-8 when bytes). An entry with
    ``"disabled": true`` is left out; members other than ``type``,
    ``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers`` and
    ``disabled`` are ignored, so configurations written for other clients
    (``description``, ``timeout``, ...) are accepted. Anything else that is
    wrong raises :class:`ConfigError`, and nothing else is raised.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_CONFIG_SIZE:
        raise ConfigError(f"the configuration is larger than {MAX_CONFIG_SIZE} bytes")
    try:
        document = parse(raw)
    except JsonError as error:
        raise ConfigError(f"the configuration is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"the configuration must be a JSON object, not {_json_type(document)}")
    servers = document.get("mcpServers")
    if not isinstance(servers, dict):
        found = "missing" if servers is None else _json_type(servers)
        raise ConfigError(f"the configuration needs an object 'mcpServers' ({found})")
    specs = []
    for name, entry in servers.items():
        if not name:
            raise ConfigError("a server name must not be empty", field="mcpServers")
        spec = _entry(name, entry)
        if spec is not None:
            specs.append(spec)
    if not specs:
        raise ConfigError("'mcpServers' names no server (that is not disabled)")
    return tuple(specs)


def load_mcp_config(path: str | os.PathLike[str]) -> tuple[ServerSpec, ...]:
    """:func:`parse_mcp_config` on the file at ``path``; :class:`ConfigError` if unreadable."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_CONFIG_SIZE + 1)
    except OSError as error:
        raise ConfigError(f"cannot read {os.fspath(path)!r}: {error.strerror or error}") from None
    try:
        return parse_mcp_config(data)
    except ConfigError as error:
        raise ConfigError(f"{os.fspath(path)}: {error}") from None


# --- the one-server forms ------------------------------------------------------


def parse_env_pair(text: str) -> tuple[str, str]:
    """``"K=V"`` as ``(K, V)``: split at the first ``=``; ``V`` may be empty."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise ConfigError(f"{text!r} is not NAME=VALUE", field="--mcp-env")
    if "\x00" in text:
        raise ConfigError("must not contain a NUL character", field="--mcp-env")
    return key, value


def parse_header_line(text: str) -> tuple[str, str]:
    """``"K: V"`` as ``(K, V)``: split at the first ``:``, spaces around ``V`` dropped."""
    key, colon, value = text.partition(":")
    value = value.strip(" \t")
    if not colon or not _TOKEN.fullmatch(key):
        raise ConfigError(f"{text!r} is not 'Name: value'", field="--mcp-header")
    if not _FIELD_VALUE.fullmatch(value):
        raise ConfigError(
            f"the value of {key!r} must be visible ASCII characters, spaces and tabs",
            field="--mcp-header",
        )
    return key, value


def _url_name(url: str) -> str:
    """A URL without its user information, query and fragment: a name safe to log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def _unique(name: str, taken: set[str]) -> str:
    candidate = name
    number = 2
    while candidate in taken:
        candidate = f"{name} ({number})"
        number += 1
    taken.add(candidate)
    return candidate


def server_specs(
    *,
    config: str | os.PathLike[str] | None = None,
    stdio: Sequence[str] = (),
    urls: Sequence[str] = (),
    env: Sequence[str] = (),
    headers: Sequence[str] = (),
    resources: Sequence[str] = (),
    mode: str | None = None,
) -> tuple[ServerSpec, ...]:
    """The servers the command line's options describe.

    The arguments are the values of ``--mcp-config FILE``, the repeated
    ``--mcp-stdio CMD`` and ``--mcp-url URL``, ``--mcp-env K=V``,
    ``--mcp-header 'K: V'``, ``--mcp-resource URI`` and ``--mcp-mode``.
    The configuration's servers come first, then the stdio commands, then
    the URLs. Each ``--mcp-env`` applies to every ``--mcp-stdio`` server and
    each ``--mcp-header`` to every ``--mcp-url`` server; ``--mcp-resource``
    (default: every listed resource) and ``--mcp-mode`` (default ``auto``)
    apply to both one-server forms. A one-server form is named after its
    command line or its URL without user information, query or fragment
    (with `` (2)`` and so on when names repeat). An
    option with nothing to apply to, like everything else wrong, raises
    :class:`ConfigError`; no server at all is not an error (an empty tuple).
    """
    specs: list[ServerSpec] = list(load_mcp_config(config)) if config is not None else []
    taken = {spec.name for spec in specs}
    if env and not stdio:
        raise ConfigError("applies to --mcp-stdio servers, and none is given", field="--mcp-env")
    if headers and not urls:
        raise ConfigError("applies to --mcp-url servers, and none is given", field="--mcp-header")
    if (resources or mode is not None) and not stdio and not urls:
        option = "--mcp-resource" if resources else "--mcp-mode"
        raise ConfigError(
            "applies to --mcp-stdio and --mcp-url servers, and none is given", field=option
        )
    environment = dict(parse_env_pair(pair) for pair in env)
    fields = dict(parse_header_line(line) for line in headers)
    chosen = tuple(resources) if resources else None
    for command in stdio:
        specs.append(
            ServerSpec.stdio(
                _unique(command, taken),
                command,
                env=environment,
                resources=chosen,
                mode=mode or "auto",
            )
        )
    for url in urls:
        specs.append(
            ServerSpec.http(
                _unique(_url_name(url), taken),
                url,
                headers=fields,
                resources=chosen,
                mode=mode or "auto",
            )
        )
    return tuple(specs)
