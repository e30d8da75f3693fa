"""The errors services raise; views and the API turn them into 4xx answers.

ServiceError
├── NotFound     unknown id, or an object of a team the requester is not in (never 403:
│                an outsider must not learn that the id exists)
├── Forbidden    a member of the team whose role does not allow the action
└── Invalid      bad input; `fields` maps each field to its message, for forms and JSON
    ├── TooMany  a team's cap (queued runs) is reached: 429 in the API, a form error on pages
    └── Conflict well-formed, but the stored state refuses it (a name taken, a trace a
                 scenario uses, a run not ended): 409 in the API, a form error on pages
"""

from __future__ import annotations


class ServiceError(Exception):
    pass


class NotFound(ServiceError):
    def __init__(self, what: str = "not found") -> None:
        super().__init__(what)


class Forbidden(ServiceError):
    pass


class Invalid(ServiceError):
    def __init__(self, message: str, *, fields: dict[str, str] | None = None) -> None:
        self.fields = fields or {}
        super().__init__(message)

    @classmethod
    def field(cls, name: str, message: str) -> Invalid:
        return cls(f"{name}: {message}", fields={name: message})


class TooMany(Invalid):
    """Input that is fine but over a quota; the message names the cap and the count."""


class Conflict(Invalid):
    """Input the schema allows that the stored state refuses: a name already taken, an
    object still in use. The same request can succeed once the state changes."""
