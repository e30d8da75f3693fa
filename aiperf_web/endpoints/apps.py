from collections.abc import Iterable

from django.apps import AppConfig


def builtin_endpoint_urls() -> Iterable[str]:
    """The built-in endpoints' URLs (the mock, the real Dynamo, the real vLLM, wherever they
    were started): no webhook may reach them (core/webhooks.py)."""
    from aiperf_web.endpoints.models import Endpoint

    return set(Endpoint.objects.filter(is_builtin=True).values_list("base_url", flat=True))


class EndpointsConfig(AppConfig):
    name = "aiperf_web.endpoints"
    label = "endpoints"

    def ready(self) -> None:
        from aiperf_web.core.webhooks import webhook_reserve

        webhook_reserve(builtin_endpoint_urls)
