"""The run page's cards, one module each: what a card shows and how its figures are read
(reports/run_page.py puts them on the page). Here: placement, server metrics, saturation
("What limits this run"). The charts of each card are declared in live/charts.py (the live
history reads them), the leak card's verdict is runs/leaks.py (the run's writer publishes it)."""
