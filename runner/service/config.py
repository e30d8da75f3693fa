"""Where the service command line finds its server and API token: a flag, else an environment
variable, else the config file `login` writes. Owns the file (one token per server URL, mode
0600, written whole and replaced atomically); talks to no server."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runner.errors import BadInput

__all__ = [
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
    "Config",
    "config_path",
    "normalize_url",
    "resolve_token",
    "resolve_url",
]

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "AIPERF_URL"
TOKEN_ENV = "AIPERF_TOKEN"

LOGIN_HINT = "python -m runner service login"


def config_path() -> Path:
    """$XDG_CONFIG_HOME/aiperf-web/config.json, ~/.config/aiperf-web/config.json without it."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "aiperf-web" / "config.json"


def normalize_url(raw: str, *, source: str) -> str:
    """The service's base address: scheme and host required, no trailing slash; a pasted API
    address (`.../api/v1`) is taken back to its base. `source` names where it came from."""
    url = raw.strip().rstrip("/")
    url = url.removesuffix("/api/v1").rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput(
            f"{source} {raw!r} is not a server address: write http://HOST:PORT "
            f"(default {DEFAULT_URL})"
        )
    if parts.query or parts.fragment:
        raise BadInput(f"{source} {raw!r}: the server address takes no ?query or #fragment")
    return url


@dataclass
class Config:
    """The file's content: the server `login` chose last, and a token per server URL (a
    token is never sent to a server other than the one it was given for)."""

    url: str | None
    tokens: dict[str, str]

    @classmethod
    def load(cls, path: Path | None = None) -> Config:
        path = path or config_path()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(url=None, tokens={})
        except OSError as exc:
            raise BadInput(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"{path} line {exc.lineno}: not JSON ({exc.msg}): delete it and run "
                f"`{LOGIN_HINT}` again"
            ) from None
        url = data.get("url") if isinstance(data, dict) else None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not (url is None or isinstance(url, str)) or not (
            isinstance(tokens, dict) and all(isinstance(v, str) for v in tokens.values())
        ):
            raise BadInput(
                f'{path}: expected {{"url": "...", "tokens": {{"URL": "TOKEN"}}}}: delete it '
                f"and run `{LOGIN_HINT}` again"
            )
        return cls(url=url, tokens=dict(tokens))

    def save(self, path: Path | None = None) -> Path:
        """Write the file readable by its owner only: a temporary file created 0600 in the
        same folder, then renamed over the old one (a reader never sees half a file, and the
        token is never in a file others can read, even for a moment)."""
        path = path or config_path()
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"url": self.url, "tokens": self.tokens}, handle, indent=2)
                handle.write("\n")
            os.chmod(temporary, 0o600)  # O_CREAT's mode is narrowed by the umask, never widened
            os.replace(temporary, path)
        except OSError as exc:
            raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
        return path


def resolve_url(flag: str | None, config: Config) -> str:
    """--url, else $AIPERF_URL, else the server `login` chose, else the local default."""
    if flag:
        return normalize_url(flag, source="--url")
    if env := os.environ.get(URL_ENV):
        return normalize_url(env, source=URL_ENV)
    if config.url:
        return normalize_url(config.url, source=f"{config_path()} url")
    return DEFAULT_URL


def resolve_token(flag: str | None, config: Config, *, url: str) -> str:
    """--token, else $AIPERF_TOKEN, else the token `login` stored for this very URL."""
    token = flag or os.environ.get(TOKEN_ENV) or config.tokens.get(url)
    if not token:
        raise BadInput(
            f"no API token for {url}: run `{LOGIN_HINT} --url {url}` (a token comes from the "
            f"Team page or `manage.py create_api_token <user>`), or set {TOKEN_ENV} or --token"
        )
    return token.strip()
