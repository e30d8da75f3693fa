from django.urls import path

from aiperf_web.sweeps import pages, views

# Namespace `sweeps` (aiperf_web/urls.py): the list, the launch form, cancel and re-run
# (views.py); the sweep page and what hangs off it (pages.py).
urlpatterns = [
    path("", views.sweep_list, name="list"),
    path("new/", views.sweep_new, name="new"),
    # The sweep page, its report, its twin, history and compare (sweeps/pages.py, helper S2).
    path("compare/", pages.sweep_compare, name="compare"),
    path("history/<str:scenario_id>/", pages.sweep_history_view, name="history"),
    path("<str:sweep_id>/", pages.sweep_detail, name="detail"),
    path("<str:sweep_id>/report.html", pages.sweep_export_html, name="export_html"),
    path("<str:sweep_id>/twin/", pages.sweep_twin, name="twin"),
    path("<str:sweep_id>/export.<str:fmt>", pages.sweep_export_data, name="export_data"),
    path("<str:sweep_id>/cancel/", views.sweep_cancel, name="cancel"),
    path("<str:sweep_id>/rerun/", views.sweep_rerun, name="rerun"),
]
