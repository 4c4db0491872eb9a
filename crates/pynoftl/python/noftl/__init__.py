"""noftl from Python: the lab's experiments, their results as dicts.

Each function takes the experiment's CLI flags as keywords (``-`` written ``_``:
``page_size='8KiB'``, ``accounts_per_branch=5000``), over the CLI's defaults, and returns the
JSON the CLI writes with ``--json``, parsed: a :class:`Result` (a dict) with ``.frame()``. Bad
input raises ``ValueError`` with the CLI's message before any work; a run that fails raises
``RuntimeError``. Runs release the GIL. docs/results.md, "Python", lists the keywords.

>>> import noftl
>>> r = noftl.compare(workload='tpcb', scale=1, quick=True)
>>> r.frame()[['storage', 'throughput_tps', 'slowdown']]
"""

import json

from . import _native

__all__ = ["Result", "compare", "bench", "io", "crashtest"]
__version__ = _native.__version__


class Result(dict):
    """An experiment's result: the CLI's JSON document as a dict."""

    def frame(self, library=None):
        """The result as a data frame: one row per store (``rows``), per query or per
        failure where the result has such a list, else one row; nested fields flattened
        with dots (``per_txn.flash_reads``). ``library``: 'pandas' (the default when it is
        installed) or 'polars'."""
        records = _records(self)
        if library is None:
            library = "pandas" if _importable("pandas") else "polars"
        if library == "pandas":
            import pandas

            return pandas.json_normalize(records, sep=".")
        if library == "polars":
            import polars

            return polars.json_normalize(records, separator=".")
        raise ValueError(f"frame() draws with 'pandas' or 'polars', not {library!r}")


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _records(doc):
    """The rows of a result: its table (`rows`: one per store) when it has one."""
    for key in ("rows",):
        rows = doc.get(key)
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            return rows
    return [doc]


def _results(docs):
    parsed = [Result(json.loads(d)) for d in docs]
    return parsed[0] if len(parsed) == 1 else parsed


def compare(**kwargs):
    """NoFTL Fig. 3: the same workload on NoFTL (native), DFTL 2/15/35% and the page FTL
    (``noftl compare``). ``quick=True``: scale 1 with 5,000 accounts per branch and two
    windows of 300 ms virtual per store (seconds, not the paper's set-up; other keywords
    override it). With ``paper=True`` a list, one result per scale."""
    return _results(_native.compare(**kwargs))


def bench(**kwargs):
    """A TPC-B (``workload='tpcb'``, the default) or TATP bench run (``noftl bench``); give
    ``txns`` or ``duration``."""
    return _results(_native.bench(**kwargs))


def io(**kwargs):
    """A fio-like workload on the raw flash or behind an FTL (``noftl io``)."""
    return _results(_native.io(**kwargs))


def crashtest(**kwargs):
    """Power cuts at random flash operations, each recovery verified (``noftl crashtest``)."""
    return _results(_native.crashtest(**kwargs))
