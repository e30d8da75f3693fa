"""The suite's xdist scheduling (tests/conftest.py): the units it names exist, and the longest
start first."""

from __future__ import annotations

from tests.conftest import LONGEST_UNITS, PART_GROUPS, TESTS, longest_first, part_group


def test_every_longest_unit_is_a_test_file_or_a_part_group():
    groups = {group for _, group in PART_GROUPS}
    for unit in LONGEST_UNITS:
        assert unit in groups or (TESTS.parent / unit).is_file(), unit
    assert len(set(LONGEST_UNITS)) == len(LONGEST_UNITS)


def test_a_shared_real_part_is_one_unit_and_any_other_file_is_its_own():
    assert part_group("tests/vllm/test_engine_real.py::test_x") == "real-servers"
    assert part_group("tests/web/test_real_dynamo_sweep.py::test_y") == "real-servers"
    assert part_group("tests/browser/test_compare.py::test_z") == "browser"
    assert part_group("tests/web/test_sweeps.py::test_w[1]") == "tests/web/test_sweeps.py"


def test_the_longest_units_start_first_and_the_others_keep_their_order():
    units = ["tests/a.py", "browser", "tests/b.py", "real-servers", "tests/web/test_ops.py"]
    assert longest_first(units) == [
        "real-servers",
        "browser",
        "tests/web/test_ops.py",
        "tests/a.py",
        "tests/b.py",
    ]
