"""Crashes on purpose, for testing a worker: DURABLE_CRASH_AT=POINT[:CLASS][@N].

The worker SIGKILLs itself at that point of a step or a wait, as a crash
would (no cleanup, no release): before_call, after_call, after_receipt,
before_commit and after_commit (of the task), before_wait, after_wait;
CLASS narrows it to a step class or a wait kind (after_call:queryable,
after_wait:await); @N to the Nth time this process comes to it (the
first, without).  Unset, it costs nothing.
"""
from __future__ import annotations

import os
import signal

_CRASH_AT, _, _NTH = (os.environ.get("DURABLE_CRASH_AT") or "").partition("@")
_left = int(_NTH or 1)


def crash_point(point: str, kind: str | None = None) -> None:
    global _left
    if _CRASH_AT and _CRASH_AT in (point, f"{point}:{kind}"):
        _left -= 1
        if _left == 0:
            os.kill(os.getpid(), signal.SIGKILL)
