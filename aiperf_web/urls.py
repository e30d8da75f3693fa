from django.contrib.auth import views as auth_views
from django.urls import include, path

from aiperf_web.api.site import api
from aiperf_web.core import views as core_views
from aiperf_web.core.login import ThrottledAuthenticationForm

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
    path("runs/", include("aiperf_web.runs.urls")),
    path("reports/", include("aiperf_web.reports.urls")),
    path("endpoints/", include("aiperf_web.endpoints.urls")),
    path("team/", include("aiperf_web.teams.urls")),
    path("", include("aiperf_web.scenarios.urls")),
]
