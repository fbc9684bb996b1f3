"""The profiles: which messages a path may carry, in what order, written once as a grammar.

A path follows one of two profiles. The provider profile (seed 000) is
``[0]*`` then at most one ``[1]``, then the end; the container profile
(seeds 001, 003) is ``[0]*`` with no finish while the connection lives, or
exactly one ``[1]`` before any ``[0]``, then the finish. The rules are
written once, as :data:`PROFILE_GRAMMAR` (per profile, which parts may
follow which): the proxy side's reader (:mod:`..client.sequence`), the
server's tables (:mod:`..server.connection`) and the container writer
(:mod:`..server.writer`) derive their tables from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..transitions import TableEnum

__all__ = [
    "GRAMMAR_POINTS",
    "PROFILE_GRAMMAR",
    "GrammarPoint",
    "Part",
    "Profile",
    "allows",
    "violates_profile",
]


class Profile(TableEnum):
    """Which sequence rules a path follows."""

    #: Seed 000: ``[0]*`` then at most one ``[1]``, then the end.
    PROVIDER = "provider"
    #: Seeds 001/003: ``[0]*`` and no finish while the connection lives, or
    #: exactly one ``[1]`` before any ``[0]``, then the finish.
    CONTAINER = "container"


class Part(TableEnum):
    """What a path carries, as the profile rules see it (keep-alives are not parts)."""

    #: A ``[0]`` message.
    NOTIFICATION = "notification"
    #: A ``[1]`` message.
    ERROR = "error"
    #: The clean end of the path.
    FINISH = "finish"


#: Where a path is in its profile's grammar: after nothing yet (``None``), or
#: after the last part it carried (a notification or the error).
GrammarPoint = Part | None

_N, _ER, _F = Part.NOTIFICATION, Part.ERROR, Part.FINISH

#: The profile rules , written once: for each profile, after what a
#: path carried last (nothing yet, a notification, the error), the parts that
#: may come next. The reader's :data:`TRANSITIONS`, the server's tables
#: (:mod:`..server.connection`) and the container writer's (:mod:`..server.writer`) are
#: derived from it when they are imported.
PROFILE_GRAMMAR: Final[Mapping[Profile, Mapping[GrammarPoint, tuple[Part, ...]]]] = {
    # the provider notifications page: [0]* then at most one [1], then the end
    Profile.PROVIDER: {None: (_N, _ER, _F), _N: (_N, _ER, _F), _ER: (_F,)},
    # the container response page/003: [0]* and no finish while the connection lives, or one [1]
    # first and then the finish (a finish with nothing before it: not served)
    Profile.CONTAINER: {None: (_N, _ER, _F), _N: (_N,), _ER: (_F,)},
}

#: The points of the grammar, in the order a path passes them.
GRAMMAR_POINTS: Final[tuple[GrammarPoint, ...]] = (None, _N, _ER)


def allows(profile: Profile, after: GrammarPoint, part: Part) -> bool:
    """Whether ``profile`` lets ``part`` come after ``after``."""
    return part in PROFILE_GRAMMAR[profile][after]


def violates_profile(profile: Profile, after: GrammarPoint, part: Part) -> bool:
    """Whether ``part`` after ``after`` is refused by this profile's rules alone.

    True when ``profile`` forbids it and another profile allows it: such a
    refusal names the profile; one that every profile makes (say, a
    notification after the error) is a plain out-of-order write.
    """
    return not allows(profile, after, part) and any(allows(other, after, part) for other in Profile)


def _check_grammar() -> None:
    # Every machine ends a path at its error (the reader reports it at once,
    # the server writes the end with it), which is only right while nothing
    # but the finish may follow an error.
    for profile, rules in PROFILE_GRAMMAR.items():
        if set(rules) != set(GRAMMAR_POINTS):
            raise ValueError(f"the {profile.value} grammar must say what follows each point")
        if rules[_ER] != (_F,):
            raise ValueError(f"in the {profile.value} grammar only the finish may follow the error")


_check_grammar()
