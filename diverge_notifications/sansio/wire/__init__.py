"""What goes on the wire, the same for both sides.

:mod:`.framing` (length-prefixed frames on a byte stream), :mod:`.messages`
(the message codec, ``[tag][JSON]``), :mod:`.asks` (the provider ask and the
channel request), :mod:`.http` (the HTTP/1.1 vocabulary both sides share)
and :mod:`.profiles` (``Profile`` and its grammar: which messages a path
carries, in what order).
"""
