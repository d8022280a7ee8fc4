"""An explain topic -> text or Markdown: one analysis's or recommendation's page, or without
a name the list of them all (``nsysprobe.report.explain`` holds the pages).

The catalogue is imported when a page is asked for: it reads every analysis module."""

from __future__ import annotations


def render_explain_text(name: str | None) -> str:
    """NAME's page, or without NAME every analysis and recommendation, a line each."""
    from nsysprobe.report import explain as catalogue

    if name is None:
        return "".join(
            f"{topic.name:<22} {topic.kind:<15} {topic.summary}\n" for topic in catalogue.topics()
        )
    return catalogue.explain(name).text + "\n"


def render_explain_markdown(name: str | None) -> str:
    """NAME's page, or without NAME the README's tables of analyses and recommendations."""
    from nsysprobe.report import explain as catalogue

    if name is None:
        return catalogue.markdown_tables()
    return catalogue.explain(name).markdown


RENDERERS = {"text": render_explain_text, "markdown": render_explain_markdown}
