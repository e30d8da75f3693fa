"""Wall seconds of each xdist work unit of a suite run, longest first, from its junit XML:
what tests/conftest.py's LONGEST_UNITS is ordered by.

    .venv/bin/python -m pytest -n 4 --dist loadfile --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/unit_times.py /tmp/suite.xml [--top 30]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import part_group  # noqa: E402


def unit_seconds(junit_xml: Path) -> Counter[str]:
    """Each unit's summed test time (setup, call and teardown: junit's default)."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        seconds[part_group(_test_file(case.get("classname", "")))] += float(case.get("time") or 0)
    return seconds


def _test_file(classname: str) -> str:
    """The test file of a junit classname ("tests.web.test_x" or "tests.web.test_x.TestY")."""
    parts = classname.split(".")
    while len(parts) > 1 and not (ROOT / ("/".join(parts) + ".py")).is_file():
        parts.pop()
    return "/".join(parts) + ".py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml", type=Path)
    parser.add_argument("--top", type=int, default=30, help="how many units to print")
    args = parser.parse_args()
    seconds = unit_seconds(args.junit_xml)
    print(f"{sum(seconds.values()):8.0f} s in all, {len(seconds)} units")
    for unit, total in seconds.most_common(args.top):
        print(f"{total:8.0f} s  {unit}")


if __name__ == "__main__":
    main()
