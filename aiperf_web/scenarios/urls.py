from django.urls import path

from aiperf_web.scenarios import views

app_name = "scenarios"
urlpatterns = [
    path("scenarios/", views.scenario_list, name="list"),
    path("scenarios/new/", views.scenario_new, name="new"),
    path("scenarios/<str:scenario_id>/", views.scenario_detail, name="detail"),
    path("scenarios/<str:scenario_id>/delete/", views.scenario_delete, name="delete"),
    path("scenarios/<str:scenario_id>/webhook/", views.scenario_webhook, name="webhook"),
    path("traces/", views.trace_list, name="traces"),
    path("traces/<str:trace_id>/", views.trace_detail, name="trace_detail"),
    path("traces/<str:trace_id>/delete/", views.trace_delete, name="trace_delete"),
]
