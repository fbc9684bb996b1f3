"""The loop bodies the adapters run: every decision, none of the I/O.

A driver is asked for its next action (:mod:`.actions`: connect, send,
receive, sleep, write, wait...) and told what came of it.
:class:`~.listen.ListenDriver` is a listener (:mod:`.listen`),
:class:`~.proxy.ProxyDriver` and :class:`~.proxy.ExchangeDriver` a proxy's
exchanges and its notification ask (:mod:`.proxy`, with the asks they
build), :class:`~.serve.ServingConnection` one accepted connection of a
server (:mod:`.serve`), configured by :class:`~.settings.ServeSettings`
(:mod:`.settings`) and reporting for the logs (:mod:`.reports`).
"""
