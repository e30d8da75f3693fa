"""Error pages in the site's dress (issue 27 item 3): 400, 403, 404 and 500 pages carry the
site's navigation, say what went wrong at which address and offer a way back; the API under
/api/ keeps answering its JSON error body. Django serves these only with DEBUG off, as tests
and production run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from aiperf_web import urls as site_urls
from tests.web.conftest import World

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug on purpose")


# This module is also the URLconf of the 500 tests: the site's routes, its error handlers, and
# a view that fails, as a page and under /api/.
urlpatterns = [path("boom/", _boom), path("api/boom/", _boom), *site_urls.urlpatterns]
handler400 = site_urls.handler400
handler403 = site_urls.handler403
handler404 = site_urls.handler404
handler500 = site_urls.handler500


def _page(response: Any, status: int) -> str:
    assert response.status_code == status
    assert response["Content-Type"].startswith("text/html")
    html: str = response.content.decode()
    assert f'data-status="{status}"' in html
    return html


def _nav(html: str) -> list[str]:
    """The navigation links of the page's header, as their text."""
    nav = html.split("<nav>")[1].split("</nav>")[0] if "<nav>" in html else ""
    return re.findall(r">([^<>]+)</a>", nav)


NAV = ["Runs", "Launch", "Sweeps", "Scenarios", "Traces", "Endpoints", "Team"]


def test_an_unknown_path_is_a_404_page_with_the_navigation_and_a_way_back(world: World) -> None:
    html = _page(world.client("viewer").get("/no/such/page/"), 404)
    assert _nav(html) == NAV
    assert "<h1>Page not found</h1>" in html and "<code>/no/such/page/</code>" in html
    assert 'id="error-back" href="/runs/">All runs<' in html
    assert "Log out" in html  # the header as on every page


def test_an_anonymous_visitor_gets_the_404_page_with_a_way_to_log_in(world: World) -> None:
    html = _page(world.client("anonymous").get("/no/such/page/"), 404)
    assert _nav(html) == [] and 'href="/accounts/login/?next=/no/such/page/">Log in<' in html


@pytest.mark.parametrize(
    ("url", "title", "named", "back"),
    [
        (f"/runs/{UNKNOWN}/", "Run not found", UNKNOWN, ("/runs/", "All runs")),
        ("/runs/not-a-run/", "Run not found", "not-a-run", ("/runs/", "All runs")),
        ("/reports/runs/not-a-run/report.html", "Run not found", "not-a-run",
         ("/runs/", "All runs")),
        (f"/scenarios/{UNKNOWN}/", "Scenario not found", UNKNOWN,
         ("/scenarios/", "All scenarios")),
        ("/endpoints/nope/", "Endpoint not found", "nope", ("/endpoints/", "All endpoints")),
    ],
)  # fmt: skip
def test_an_unknown_id_names_what_was_not_found_and_leads_back_to_its_list(
    world: World, url: str, title: str, named: str, back: tuple[str, str]
) -> None:
    html = _page(world.client("viewer").get(url), 404)
    assert _nav(html) == NAV
    assert f"<h1>{title}</h1>" in html
    what = title.removesuffix(" not found").lower()
    assert f"No {what} &#x27;{named}&#x27; in your teams" in html
    assert f'id="error-back" href="{back[0]}">{back[1]}<' in html


def test_another_teams_run_reads_exactly_as_an_unknown_one(world: World) -> None:
    theirs = world.client("outsider").get(f"/runs/{world.run.uuid}/")
    unknown = world.client("outsider").get(f"/runs/{UNKNOWN}/")

    def card(html: str) -> str:
        return html.split('id="error-page"')[1].split("</section>")[0]

    assert card(_page(theirs, 404)).replace(str(world.run.uuid), UNKNOWN) == card(
        unknown.content.decode()
    )


def test_a_refused_action_is_a_403_page_saying_which_role_it_needs(world: World) -> None:
    html = _page(world.client("viewer").post(f"/runs/{world.run.uuid}/rerun/"), 403)
    assert _nav(html) == NAV and "<h1>Not allowed</h1>" in html
    assert "needs member or admin" in html
    assert 'id="error-back" href="/runs/">All runs<' in html


def test_a_form_with_a_stale_security_token_is_a_403_page_saying_to_reload(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.teammate)
    html = _page(client.post(f"/runs/{world.run.uuid}/rerun/"), 403)
    assert _nav(html) == NAV and "<h1>Form expired</h1>" in html
    assert "Reload the page and send the form again" in html


def test_a_request_for_a_host_the_site_does_not_serve_is_a_400_page(world: World) -> None:
    html = _page(world.client("viewer").get("/runs/", HTTP_HOST="evil.example"), 400)
    assert "<h1>Bad request</h1>" in html and "evil.example" not in html


@pytest.mark.urls("tests.web.test_error_pages")
def test_a_bug_is_a_500_page_with_the_navigation_and_no_traceback(world: World) -> None:
    client = world.client("viewer")
    client.raise_request_exception = False
    html = _page(client.get("/boom/"), 500)
    assert _nav(html) == NAV and "<h1>Server error</h1>" in html
    # Who asked is not read (the error may be the database's): no Log out, no Log in.
    assert "Log out" not in html and "Log in" not in html
    assert "a bug on purpose" not in html and "Traceback" not in html


@pytest.mark.parametrize("url", ["/api/v1/no/such/route", "/api/nope", "/api/"])
def test_the_api_answers_unknown_routes_with_its_json_error_body(world: World, url: str) -> None:
    response = world.api("viewer").get(url)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    body = response.json()
    assert body["errors"] == [] and body["detail"].startswith(f"no API route {url}")


@pytest.mark.urls("tests.web.test_error_pages")
def test_a_bug_under_the_api_and_a_bad_host_answer_json(world: World) -> None:
    client = world.api("viewer")
    client.raise_request_exception = False
    for response, status in (
        (client.get("/api/boom/"), 500),
        (client.get("/api/v1/runs", HTTP_HOST="evil.example"), 400),
    ):
        assert response.status_code == status and response["Content-Type"] == "application/json"
        assert (
            response.json()["errors"] == [] and "a bug on purpose" not in response.json()["detail"]
        )


def test_the_api_keeps_its_own_json_for_an_unknown_id(world: World) -> None:
    response = world.api("viewer").get("/api/v1/runs/not-a-run")
    assert response.status_code == 404 and response.json()["detail"] == "run not found"
