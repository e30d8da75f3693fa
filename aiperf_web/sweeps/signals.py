"""What the sweeps app announces: `sweep_changed` (kwarg `sweep_uuid`) after every committed
change of a sweep or of one of its points (a point made, a point's result stored, the sweep's
end or cancel), for its live page to redraw from `selectors.sweep_detail` without polling."""

from __future__ import annotations

from django.dispatch import Signal

sweep_changed = Signal()
