from django.urls import path

from aiperf_web.teams import views

app_name = "teams"
urlpatterns = [
    path("", views.team_page, name="page"),
    path("<str:team_id>/members/", views.member_set, name="member_set"),
    path("<str:team_id>/members/remove/", views.member_remove, name="member_remove"),
    path("<str:team_id>/webhook/", views.team_webhook, name="webhook"),
    path("tokens/new/", views.token_create, name="token_create"),
    path("tokens/<str:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]
