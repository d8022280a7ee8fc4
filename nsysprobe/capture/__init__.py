"""Capture: the only code in nsysprobe that starts processes.

Find an nsys (``locate``), read a report's version without running it (``reportfile``),
profile a workload into a run folder (``profile``), finish a capture that stopped at a
``.qdstrm`` (``importer``), export a report to SQLite (``export``) and check the machine
(``doctor``).
"""
