"""Verdicts: measured data in, a decision out.

``samples`` (what a gate is handed), ``bounds`` (confidence bounds and decision rules), ``methods``
(one Method per statistic kind), ``rules`` (what every evaluation shares), ``verdict`` (one gate on one
sample), ``comparison`` (a gate between two runs), ``sequential`` (draw until decided), ``wording``
(how a verdict reads), ``failures`` (the exceptions a gate raises). Nothing here measures anything or
imports pytest.
"""
