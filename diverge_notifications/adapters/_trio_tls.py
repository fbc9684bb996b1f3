"""TLS on trio streams: a listener's connection and a server's accepted one.

The trio adapter's counterpart of the blocking helpers in :mod:`.tls`:
:func:`connect` opens a connection and, with a context, wraps it in
``trio.SSLStream`` and completes the handshake; :func:`secure_accepted`
does the server's handshake on an accepted connection, within the time a
new connection has for its ask. Imported by :mod:`.trio` only (it needs
the ``trio`` extra).
"""

from __future__ import annotations

import ssl

import trio

from ._common import ServerBase
from ._trio_parts import STREAM_ERRORS

__all__ = ["connect", "secure_accepted"]


async def connect(host: str, port: int, context: ssl.SSLContext | None) -> trio.abc.Stream:
    """A connection to ``host``:``port``, inside TLS (verified for ``host``) with ``context``.

    The caller bounds the time it takes; a stream whose handshake fails is
    closed. Raises ``OSError`` or ``trio.BrokenResourceError`` (caused by
    the :class:`ssl.SSLError`).
    """
    stream = await trio.open_tcp_stream(host, port)
    if context is None:
        return stream
    # https_compatible: a peer may end without a TLS close, as HTTP servers do.
    secured = trio.SSLStream(stream, context, server_hostname=host, https_compatible=True)
    try:
        await secured.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(secured)
        raise
    return secured


async def secure_accepted(stream: trio.abc.Stream, server: ServerBase) -> trio.abc.Stream | None:
    """``stream`` inside the TLS of ``server``, or as it is if the server has none.

    ``None`` if the handshake fails or takes longer than the server's
    ``ask_timeout``: the caller closes the connection.
    """
    if server.tls is None:
        return stream
    secured = trio.SSLStream(stream, server.tls, server_side=True, https_compatible=True)
    with trio.move_on_after(server.ask_timeout):
        try:
            await secured.do_handshake()
        except STREAM_ERRORS:
            return None
        return secured
    return None
