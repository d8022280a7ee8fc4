"""``python -m nsysprobe``: the same as the ``nsysprobe`` command."""

from nsysprobe.cli import main

main(prog_name="nsysprobe")
