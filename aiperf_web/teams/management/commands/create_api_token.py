"""`python manage.py create_api_token <username>`: print a new personal API token."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aiperf_web.teams.services import api_token_create


class Command(BaseCommand):
    help = "Create a personal API token for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="a label for the token")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"no user named {opts['username']!r}")
        _, raw = api_token_create(user=user, name=opts["name"])
        self.stdout.write(raw)
