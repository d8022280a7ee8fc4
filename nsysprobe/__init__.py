"""nsysprobe: why the GPU starves in a PyTorch training trace, and what to change next.

>>> import nsysprobe
>>> report = nsysprobe.analyze("run.sqlite")   # or a .nsys-rep report
>>> report.verdict.id
'pinned_memory'
>>> many = nsysprobe.analyze_many("ranks/")   # one report per rank, on Dask
>>> many.stragglers
('rank3',)
"""

from nsysprobe.common.lazy import lazy_exports
from nsysprobe.errors import NsysprobeError

# Imported on first use: the command line imports only what its command needs.
lazy_exports(
    __name__,
    {
        "analyze": "report.analyze",
        "Report": "report.analyze",
        "analyze_many": "ranks.many",
        "ManyReport": "analyses.cross_rank",
    },
)

__all__ = ["analyze", "analyze_many", "Report", "ManyReport", "NsysprobeError"]
