"""Placeholder: the server connection (being written)."""


class ServerConnection:
    pass


class ContainerWriter:
    pass
