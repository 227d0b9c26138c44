"""polylite's airspeed velocity (asv) suite: the headline passes as multiples of X @ P.

Configured by ``benchmarks/asv.conf.json``; run ``asv`` from ``benchmarks/`` (see
"Tracking performance across commits" in ``docs/benchmarks.rst``).  Not part of
the test suite.
"""
