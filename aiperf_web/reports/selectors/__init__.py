"""Reads behind the run report, the agent-tree view, the comparison and the scenario history,
one module per read model (import the module: `from aiperf_web.reports.selectors import
compare`). Everything comes from the database: the stored time series (thinned), the stored
summary, and for the agent-tree view a bounded slice of the records. The verdict on a run (its
own checks, and its figures against a baseline: KEY_METRICS) is runs/verdict.py's; the report,
compare and history show it.

    report.py    the run page and its export: series, leak verdict, drain, groups, verdict
    trees.py     the agent-tree view: sampled trees from a bounded scan of the records
    compare.py   two or more runs side by side, with the verdict words that know repeats
    history.py   a scenario's succeeded runs as trend lines, one per configuration
"""
