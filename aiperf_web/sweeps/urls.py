from django.urls import path

from aiperf_web.sweeps import views

# Namespace `sweeps` (aiperf_web/urls.py). The detail view here is a placeholder: helper S2's
# sweep page (live charts and channel) replaces views.sweep_detail under the same name.
urlpatterns = [
    path("", views.sweep_list, name="list"),
    path("new/", views.sweep_new, name="new"),
    path("<str:sweep_id>/", views.sweep_detail, name="detail"),
    path("<str:sweep_id>/cancel/", views.sweep_cancel, name="cancel"),
    path("<str:sweep_id>/rerun/", views.sweep_rerun, name="rerun"),
]
