from django.urls import path

from aiperf_web.runs import views

# The namespace `runs` is given where these are included (aiperf_web/urls.py); the run page
# beside them at /runs/<id>/ is reports' own URLconf (reports/run_urls.py, namespace `run`).
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.run_new, name="new"),
    path("<str:run_id>/cancel/", views.run_cancel, name="cancel"),
    path("<str:run_id>/rerun/", views.run_rerun, name="rerun"),
    path("<str:run_id>/meta/", views.run_meta, name="meta"),
    path("<str:run_id>/records.jsonl", views.run_records, name="records"),
    path("<str:run_id>/summary.json", views.run_summary_json, name="summary_json"),
    path("<str:run_id>/summary.csv", views.run_summary_csv, name="summary_csv"),
]
