"""The proxy side: the connection that asks and reads what comes back.

:class:`~.connection.ProxyConnection` (a notification ask) and
:class:`~.connection.ExchangeConnection` (an exchange of kinds 0-3) in
:mod:`.connection`, built on :mod:`.heads` and :mod:`.bodies` (the answer's
heads and body readers), :mod:`.sequence` (the rules of a path) and
:mod:`.answer` (the rules of a one-shot answer); :mod:`.policy` says when
to ask again and :mod:`.urls` reads the URLs a listener is given.
"""
