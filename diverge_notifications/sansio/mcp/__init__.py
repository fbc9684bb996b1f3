"""The MCP model: what a notification is, independent of how it travels.

:mod:`.model` (``Notification`` and ``ErrorData``, kept lossless),
:mod:`.json` (strict, total JSON decoding and compact encoding),
:mod:`.kinds` (notification kinds by method, log levels, error codes) and
:mod:`.views` (typed views of the known notifications). The names an
application uses are offered by :mod:`diverge_notifications.sansio`.
"""
