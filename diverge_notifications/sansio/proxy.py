"""Placeholder: the proxy connection (being written)."""


class ProxyConnection:
    pass


class ExchangeConnection:
    pass
