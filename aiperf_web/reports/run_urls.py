"""The run page's own URLconf, namespace `run`: `run:page` is /runs/<id>/, the path it always
had (the service CLI and shared links print it), mounted by aiperf_web/urls.py after the runs
app's pages so that /runs/new/ stays the launch form. The page and its cards are reports'
(views.py run_detail, run_page.py, cards/)."""

from django.urls import path

from aiperf_web.reports import views

app_name = "run"
urlpatterns = [
    path("<str:run_id>/", views.run_detail, name="page"),
]
