"""``gluon.env_file.SETTINGS`` names every variable gluon reads: the env file refuses any
other name with gluon's prefixes as a typo, so a setting read but not listed there would be
refused in every env file that sets it."""

from __future__ import annotations

import re
from pathlib import Path

from gluon.env_file import GLUON_PREFIXES, SETTINGS

GLUON = Path(__file__).resolve().parents[2] / "gluon"
PREFIXES = "|".join(prefix.rstrip("_") for prefix in GLUON_PREFIXES)
# A variable read by name: env.get("X"), os.environ.get("X"), os.environ["X"], os.getenv("X").
READ = re.compile(rf"""(?:\.get|getenv|environ\[)\(?\s*["']((?:{PREFIXES})_[A-Z0-9_]+)["']""")


def test_every_variable_gluon_reads_is_a_listed_setting() -> None:
    read = {
        name
        for path in GLUON.rglob("*.py")
        for name in READ.findall(path.read_text(encoding="utf-8"))
    }
    assert "GLUON_SOURCE_URL" in read, "the scan finds the settings config.py reads"
    assert sorted(read - set(SETTINGS)) == []
