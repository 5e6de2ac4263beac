"""Verdicts: measured data in, a decision out.

``samples`` (what a gate is handed), ``bounds`` (confidence bounds and decision rules), ``methods``
(one Method per statistic kind, one Comparison per compare kind: the registry every evaluation goes
through), ``rules`` (what every evaluation shares), ``verdict`` (one gate on one sample),
``comparison`` (a gate between two runs), ``sequential`` (draw until decided), ``record`` (a stored
verdict, typed), ``wording`` (how a verdict reads), ``failures`` (the exceptions a gate raises).
Nothing here measures anything or imports pytest.
"""
