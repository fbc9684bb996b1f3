"""Placeholder: the hub (being written)."""


class Hub:
    pass


class Interest:
    pass


class Subscriber:
    pass
