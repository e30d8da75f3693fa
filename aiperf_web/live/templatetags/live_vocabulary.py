"""`{% page_vocabulary %}`: the vocabulary the pages' scripts read (live/vocabulary.py), as
<script type="application/json" id="vocabulary">."""

from __future__ import annotations

import functools

from django import template
from django.utils.html import json_script
from django.utils.safestring import SafeString

from aiperf_web.live.vocabulary import page_vocabulary as _vocabulary

register = template.Library()


@functools.cache
def _script() -> SafeString:
    return json_script(_vocabulary(), "vocabulary")


@register.simple_tag
def page_vocabulary() -> SafeString:
    return _script()
