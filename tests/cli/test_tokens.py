"""Where ``serve`` and ``listen`` take their token from, and that it is never shown.

The token comes from ``--token`` or ``--token-file PATH`` (which exclude
each other), else from ``DIVERGE_TOKEN``. A token file gives its first
line, the line break removed (``serve`` reads every line of its file:
``tests/cli/test_audiences.py``). No message of either command repeats a
token, whether it was usable or not.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from diverge_notifications.cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, build_parser, main
from diverge_notifications.cli.parser import (
    MAX_TOKEN_FILE_LINE,
    TOKEN_ENV,
    read_token_file,
    resolve_token,
)
from tests.interop import ListenProcess, ServeProcess, cli_command, cli_env, free_port, run_cli

SECRET = "s3cret-Token_value.42"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["listen", "http://127.0.0.1:1", *argv])


def _token_file(folder: Path, content: bytes, name: str = "token") -> str:
    path = folder / name
    path.write_bytes(content)
    return str(path)


# --- precedence -------------------------------------------------------------------------


def test_token_wins_over_the_environment(tmp_path: Path) -> None:
    environ = {TOKEN_ENV: "from-env"}
    assert resolve_token(_args("--token", "opt"), listening=True, environ=environ) == "opt"
    path = _token_file(tmp_path, b"from-file\n")
    assert resolve_token(_args("--token-file", path), listening=True, environ=environ) == (
        "from-file"
    )
    assert resolve_token(_args(), listening=True, environ=environ) == "from-env"
    assert resolve_token(_args(), listening=True, environ={}) is None


@pytest.mark.parametrize("command", ["serve", "listen"])
def test_token_and_token_file_together_are_a_usage_error(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _token_file(tmp_path, b"x\n")
    argv = [command, "--token", SECRET, "--token-file", path]
    if command == "listen":
        argv.insert(1, "http://127.0.0.1:1")
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "argument --token-file: not allowed with argument --token" in err
    assert SECRET not in err


@pytest.mark.parametrize("command", ["serve", "listen"])
def test_the_help_says_which_token_wins(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--token-file PATH" in text
    assert (
        "The token comes from --token or --token-file (not both), else from $DIVERGE_TOKEN: "
        "an option wins over the environment." in text
    )
    assert text.count("wins over $DIVERGE_TOKEN") == 2


# --- token files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "token"),
    [
        (b"abc\n", "abc"),
        (b"abc", "abc"),
        (b"abc\r\n", "abc"),
        (b"abc\nsecond line\n", "abc"),
        (b"\n", ""),
        (b"", ""),
        (b"abc \n", "abc "),  # only the line break goes: check_token refuses the space
        (b"x" * MAX_TOKEN_FILE_LINE + b"\r\n", "x" * MAX_TOKEN_FILE_LINE),
    ],
)
def test_a_token_file_gives_its_first_line(tmp_path: Path, content: bytes, token: str) -> None:
    assert read_token_file(_token_file(tmp_path, content)) == token


def test_a_token_file_is_read_no_further_than_its_limit(tmp_path: Path) -> None:
    path = _token_file(tmp_path, b"y" * (MAX_TOKEN_FILE_LINE + 1) + b"\n")
    with pytest.raises(ValueError) as raised:
        read_token_file(path)
    assert str(raised.value) == (
        f"the first line of --token-file {path} is longer than {MAX_TOKEN_FILE_LINE} bytes"
    )
    with pytest.raises(ValueError, match="longer than"):
        read_token_file("/dev/zero")  # an endless file: refused, not read to its end


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "unusable token from --token-file {path}: "),
        (f"{SECRET} \n".encode(), "unusable token from --token-file {path}: "),
        (f"{SECRET}\u00e9\n".encode(), "unusable token from --token-file {path}: "),
        (b"\xef\xbb\xbf" + SECRET.encode(), "unusable token from --token-file {path}: "),
    ],
    ids=["empty", "trailing space", "not ascii", "byte order mark"],
)
@pytest.mark.parametrize("command", ["serve", "listen"])
def test_an_unusable_token_file_is_a_usage_error(
    command: str,
    content: bytes,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _token_file(tmp_path, content)
    where = ["--port", "0"] if command == "serve" else ["http://127.0.0.1:1", "--once"]
    argv = [command, *where, "--token-file", path]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"python -m diverge_notifications {command}: error: ")
    expected = message.format(path=path)
    if (
        command == "serve"
    ):  # serve reads every line, and names the line (tests/cli/test_audiences.py)
        expected = (
            f"--token-file {path} lists no token"
            if not content
            else expected.replace("from --token-file", "from line 1 of --token-file")
        )
    assert expected in err
    assert err.count("\n") == 1
    assert SECRET not in err and "cret" not in err


def test_a_token_file_that_cannot_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing")
    assert main(["listen", "http://127.0.0.1:1", "--token-file", missing]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "python -m diverge_notifications listen: error: "
        f"cannot read --token-file {missing}: No such file or directory\n"
    )
    assert main(["serve", "--port", "0", "--token-file", str(tmp_path)]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "python -m diverge_notifications serve: error: "
        f"cannot read --token-file {tmp_path}: Is a directory\n"
    )


# --- the environment --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", f"{SECRET}\n", f" {SECRET}"], ids=repr)
@pytest.mark.parametrize("command", ["serve", "listen"])
def test_an_unusable_token_in_the_environment_is_a_usage_error(
    command: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Set but empty is not "no token": a server must not go open because a secret did not load.
    monkeypatch.setenv(TOKEN_ENV, value)
    argv = ["serve", "--port", "0"] if command == "serve" else ["listen", "http://127.0.0.1:1"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        f"python -m diverge_notifications {command}: error: unusable token from DIVERGE_TOKEN: "
        "a token is one or more visible ASCII characters\n"
    )


def test_an_option_overrides_an_unusable_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "not usable")
    path = _token_file(tmp_path, b"usable\n")
    assert resolve_token(_args("--token-file", path), listening=True) == "usable"
    assert resolve_token(_args("--token", "fine"), listening=True) == "fine"


# --- end to end -------------------------------------------------------------------------


def _listen_events(url: str, *args: str, env: dict[str, str] | None = None) -> list[Any]:
    """The events of ``listen --once`` when it is refused (exit status 5)."""
    with ListenProcess(url, "--once", "--events", *args, env=env) as listen:
        assert listen.wait() == EXIT_REFUSED
        assert SECRET not in listen.stderr.text()
        return [record["event"] for record in listen.events()]


def test_serve_and_listen_take_the_token_from_a_file_and_the_environment(tmp_path: Path) -> None:
    path = _token_file(tmp_path, f"{SECRET}\n".encode())
    with ServeProcess("--token-file", path, stdin=False) as serve:
        # Without a token, and with the wrong one: refused.
        assert _listen_events(serve.url) == ["NotServed"]
        assert _listen_events(serve.url, env=cli_env(DIVERGE_TOKEN="wrong")) == ["NotServed"]
        # The token from the environment, and from a file; an option wins over the variable.
        with (
            ListenProcess(
                serve.url, "--once", "--events", env=cli_env(DIVERGE_TOKEN=SECRET)
            ) as by_env,
            ListenProcess(serve.url, "--once", "--events", "--token-file", path) as by_file,
        ):
            by_env.wait_for_event("StreamOpened")
            by_file.wait_for_event("StreamOpened")
            overridden = ListenProcess(
                serve.url,
                "--once",
                "--events",
                "--token",
                "wrong",
                env=cli_env(DIVERGE_TOKEN=SECRET),
            )
            with overridden:
                assert overridden.wait() == EXIT_REFUSED
                assert [record["event"] for record in overridden.events()] == ["NotServed"]
            assert serve.interrupt(signal.SIGTERM) == EXIT_OK
            assert by_env.wait() == EXIT_OK
            assert by_file.wait() == EXIT_OK
        assert SECRET not in serve.stderr.text()
    with ServeProcess(stdin=False, env=cli_env(DIVERGE_TOKEN=SECRET)) as serve:
        assert _listen_events(serve.url) == ["NotServed"]  # the server took it from the variable
        assert serve.interrupt() == EXIT_OK


def test_a_token_file_keeps_the_token_out_of_the_process_list(tmp_path: Path) -> None:
    path = _token_file(tmp_path, f"{SECRET}\n".encode())
    with ServeProcess("--token-file", path, stdin=False) as serve:
        cmdline = Path(f"/proc/{serve.proc.pid}/cmdline")
        if not cmdline.exists():
            pytest.skip("no /proc on this system")
        assert path.encode() in cmdline.read_bytes()
        assert SECRET.encode() not in cmdline.read_bytes()
        assert serve.interrupt() == EXIT_OK


def test_serve_refuses_an_unusable_token_file_before_serving(tmp_path: Path) -> None:
    path = _token_file(tmp_path, b"has space\n")
    result = run_cli(cli_command("serve", "--port", str(free_port()), "--token-file", path))
    assert result.returncode == EXIT_USAGE
    assert b"serving on" not in result.stderr
    assert b"has space" not in result.stderr
    assert os.path.exists(path)
