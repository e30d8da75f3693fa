from django.urls import path

from aiperf_web.endpoints import views

app_name = "endpoints"
urlpatterns = [
    path("", views.endpoint_list, name="list"),
    path("new/", views.endpoint_new, name="new"),
    path("<str:endpoint_id>/", views.endpoint_detail, name="detail"),
    path("<str:endpoint_id>/test/", views.endpoint_test, name="test"),
    path("<str:endpoint_id>/delete/", views.endpoint_delete, name="delete"),
]
