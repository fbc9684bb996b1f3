"""Placeholder: the proxy policy (being written)."""


class AttemptsExhausted:
    pass


class Backoff:
    pass


class ProxyPolicy:
    pass
