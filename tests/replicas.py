"""What the cluster tests share: notifications as publishers write them, and reading them back.

Import from test modules as ``from replicas import ...`` (pytest puts
``tests/`` on ``sys.path``).
"""

from __future__ import annotations

from diverge_notifications.sansio.server.hub import Subscriber

__all__ = ["BIG", "ODD", "numbered", "taken"]

#: Notifications as a publisher might write them; each must arrive exactly so.
ODD = [
    b' {  "params" : { "progress" : 1 , "progressToken" : "t" } ,'
    b'"method":"notifications/progress"}\n',
    b'{"method":"notifications/message","params":{"level":"info","data":"\\u00e9\\ud83d\\ude00"}}',
    '{"method":"x/ünïcødé","params":{"z":1,"a":[1.0,2e3,-0],"m":{"b":null,"a":true}}}'.encode(),
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed","_extra":{"\\"":"\\\\"}}',
]
#: An 8 MiB notification, of escapes.
BIG = b'{"method":"x/big","params":{"blob":"' + b"\\u00e9" * (8 * 1024 * 1024 // 6) + b'"}}'


def numbered(i: int) -> bytes:
    """The JSON of notification number ``i``."""
    return b'{"method":"x/n","params":{"i":%d}}' % i


def taken(subscriber: Subscriber) -> list[bytes]:
    """The bytes of what ``subscriber`` queued, taken from it."""
    return [notification.to_bytes() for notification in subscriber.take()]
