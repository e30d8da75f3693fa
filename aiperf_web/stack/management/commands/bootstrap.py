"""`python manage.py bootstrap`: create the demo objects (team `default`, user `admin`,
endpoint `built-in mock`, scenario `demo`) without serving; idempotent."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from aiperf_web.stack.demo import DEMO_USER, demo_bootstrap, mock_url_default


class Command(BaseCommand):
    help = "Create the demo team, admin user, built-in mock endpoint and demo scenario."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--mock-url", default="", help="URL of the built-in mock")

    def handle(self, *args: Any, **opts: Any) -> None:
        boot = demo_bootstrap(mock_url=opts["mock_url"] or mock_url_default())
        if boot.admin_password:
            self.stdout.write(f"Created user {DEMO_USER} with password {boot.admin_password}")
        self.stdout.write(
            f"team {boot.team.name}, scenario {boot.scenario.name} ({boot.scenario.uuid}), "
            f"endpoint {boot.endpoint.name} ({boot.endpoint.uuid}) at {boot.endpoint.base_url}"
        )
