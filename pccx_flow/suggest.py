"""`did you mean`: the nearest known name to a mistyped one, for one-line error messages.

A user who types ``--policy hetf`` or ``--preset e4`` should read the fix in the error, not
search a list of names for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'heft'?)"`` for the closest of `known` to `name`, else ``""``.

    Case is ignored when matching; the suggestion is spelled as `known` spells it."""
    choices = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {choices[close[0]]!r}?)" if close else ""
