"""Wait until no other package manager holds apt's locks (used by scripts/setup.sh).

python3 scripts/wait_for_apt.py SECONDS LOCK_FILE...

apt, apt-get, dpkg and unattended-upgrades take their locks with fcntl locks, which
``fcntl.lockf`` sees. Exits 0 once every existing lock file is free (each is taken and at once
released), 1 with one line when one is still held after SECONDS. Standard library only: it
runs before the virtualenv exists.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

POLL_SECONDS = 1.0


def wait_for_locks(paths: list[str], seconds: float) -> str | None:
    """None once every lock in ``paths`` is free; the held one's path after ``seconds``."""
    deadline = time.monotonic() + seconds
    told = False
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path, "a") as lock:
            while True:
                try:
                    fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    if time.monotonic() >= deadline:
                        return path
                    if not told:
                        print(f"setup: waiting for another package manager ({path} is locked)")
                        sys.stdout.flush()
                        told = True
                    time.sleep(POLL_SECONDS)
                else:
                    fcntl.lockf(lock, fcntl.LOCK_UN)
                    break
    return None


def main(argv: list[str]) -> int:
    seconds, paths = float(argv[0]), argv[1:]
    held = wait_for_locks(paths, seconds)
    if held is not None:
        print(
            f"setup: ERROR: {held} is still locked by another package manager after "
            f"{seconds:g} s (set GLUON_APT_WAIT to wait longer)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
