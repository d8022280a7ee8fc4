"""nsysprobe: why the GPU starves in a PyTorch training trace, and what to change next.

>>> import nsysprobe
>>> report = nsysprobe.analyze("run.sqlite")   # or a .nsys-rep report
>>> report.verdict.id
'pinned_memory'
"""

from nsysprobe.errors import NsysprobeError
from nsysprobe.report import Report, analyze

__all__ = ["analyze", "Report", "NsysprobeError"]
