from django.urls import path

from aiperf_web.reports import views

app_name = "reports"
urlpatterns = [
    path("compare/", views.compare, name="compare"),
    path("ab/new/", views.ab_new, name="ab_new"),
    path("ab/<str:pair_id>/", views.ab_detail, name="ab"),
    path("scenarios/<str:scenario_id>/history/", views.history, name="history"),
    path("runs/<str:run_id>/trees.json", views.run_trees, name="trees"),
    path("runs/<str:run_id>/report.html", views.run_export_html, name="export_html"),
]
