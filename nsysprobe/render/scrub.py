"""A ScrubResult -> text or JSON: what ``nsysprobe scrub`` kept, scrubbed and dropped."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from nsysprobe.common.units import counted

if TYPE_CHECKING:
    from nsysprobe.trace.scrub import ScrubResult


def render_scrub_text(r: ScrubResult) -> str:
    return (
        f"wrote {r.output}: kept {counted(len(r.tables_kept), 'table')} with the columns "
        f"nsysprobe reads; dropped {counted(r.tables_dropped, 'table')}, "
        f"{counted(r.columns_dropped, 'column')} and "
        f"{counted(r.objects_dropped, 'view/trigger/index', 'views/triggers/indexes')}\n"
        f"scrubbed {counted(r.texts_scrubbed, 'name')} (secrets, paths, addresses); dropped "
        f"{counted(r.strings_dropped, 'unreferenced string')} and "
        f"{counted(r.rows_dropped, 'metadata/diagnostic row')}\n"
    )


def render_scrub_json(result: ScrubResult) -> str:
    """What was kept and dropped, for scripts (with a schema_version)."""
    from nsysprobe.trace.scrub import SCHEMA_VERSION

    data = dataclasses.asdict(result)
    data["output"] = str(result.output)
    data["tables_kept"] = list(result.tables_kept)
    return json.dumps({"schema_version": SCHEMA_VERSION, **data}, indent=2) + "\n"


RENDERERS = {"text": render_scrub_text, "json": render_scrub_json}
