"""The run page's cards, one module each: what a card shows and how its figures are read
(reports/run_page.py puts them on the page). Here so far: placement, server metrics."""
