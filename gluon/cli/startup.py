"""A command's start-up: the cyclic garbage collector paused while its modules load.

Importing a command loads SQLAlchemy, pyarrow, typer and gluon: hundreds of thousands of
objects that live as long as the process. The collector would scan them again each time
the allocations cross its thresholds (a full collection of them alone is 25-60 ms of a
one-second IMMEDIATE sync, issue 28). Importing this module first pauses it; the command's
module calls :func:`done` once its imports are done (also when a test imports it), which
moves what was loaded out of the collector's reach (``gc.freeze``) and starts it again, so
the run itself is collected as usual.
"""

import gc

_was_enabled = gc.isenabled()
gc.disable()


def done() -> None:
    """Start-up is over: what it loaded is never scanned again, the collector runs again
    (unless it was off before)."""
    gc.freeze()
    if _was_enabled:
        gc.enable()
