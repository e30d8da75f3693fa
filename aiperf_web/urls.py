from django.contrib.auth import views as auth_views
from django.urls import include, path

from aiperf_web.api.site import api
from aiperf_web.core import views as core_views
from aiperf_web.core.login import ThrottledAuthenticationForm
from aiperf_web.runs import urls as runs_urls
from aiperf_web.sweeps import urls as sweeps_urls

urlpatterns = [
    path("", core_views.home, name="home"),
    path("health/", core_views.health, name="health"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(
            template_name="core/login.html",
            redirect_authenticated_user=True,
            authentication_form=ThrottledAuthenticationForm,
        ),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    path("", include("aiperf_web.ops.urls")),
    # /runs/: the runs app's pages, then the run page (reports' own, namespace `run`).
    path("runs/", include((runs_urls.urlpatterns, "runs"))),
    path("runs/", include("aiperf_web.reports.run_urls")),
    path("sweeps/", include((sweeps_urls.urlpatterns, "sweeps"))),
    path("reports/", include("aiperf_web.reports.urls")),
    path("endpoints/", include("aiperf_web.endpoints.urls")),
    path("team/", include("aiperf_web.teams.urls")),
    path("", include("aiperf_web.scenarios.urls")),
]

# Error pages in the site's dress, JSON under /api/ (core/views.py).
handler400 = "aiperf_web.core.views.bad_request"
handler403 = "aiperf_web.core.views.permission_denied"
handler404 = "aiperf_web.core.views.page_not_found"
handler500 = "aiperf_web.core.views.server_error"
