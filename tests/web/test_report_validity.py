"""The run page shows the summary's validity (runner/validity.py: InferenceX's rules), valid or
invalid with the reason."""

from __future__ import annotations

from runner.validity import judge
from tests.web.conftest import World
from tests.web.test_reports import _finished, _summary


def test_the_run_page_shows_whether_the_run_is_valid_and_why_not(world: World) -> None:
    valid = judge(requests=1000, errors=20, cut=0, completed=980, ttft_measured=980)
    invalid = judge(requests=1000, errors=150, cut=0, completed=850, ttft_measured=800)
    owner = world.client("owner")
    for validity, badge, words in (
        (valid, "valid", "within the thresholds"),
        (invalid, "invalid", "Errors 15 % &gt; 10 %"),
    ):
        run = _finished(world, summary=_summary(validity=validity))
        html = owner.get(f"/runs/{run.uuid}/").content.decode()
        section = html.split('id="validity"')[1].split("</section>")[0]
        assert f'<span class="badge">{badge}</span>' in section
        assert words in section
        assert "error share (max 10 %)" in section and "TTFT coverage (min 98 %)" in section
        shares = {"valid": ("2 %", "100 %"), "invalid": ("15 %", "94 %")}[badge]
        assert all(f"<b>{share}</b>" in section for share in shares)
    # A summary from before validity existed shows no such card.
    old = _finished(world, summary=_summary())
    assert 'id="validity"' not in owner.get(f"/runs/{old.uuid}/").content.decode()
