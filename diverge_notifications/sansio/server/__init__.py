"""The server side and the hub.

:class:`~.connection.ServerConnection` in :mod:`.connection` reads one
request (:mod:`.request`) and writes its answer (:mod:`.writer`); the
:class:`~.hub.Hub` in :mod:`.hub` publishes once and fans out to bounded
subscriptions (:mod:`.subscriber`), narrowed by an ``Interest``
(:mod:`.filters`) and counted (:mod:`.counts`).
"""
