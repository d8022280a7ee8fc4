"""``nsysprobe explain``: each analysis's definition from its module's docstring, each
recommendation's meaning from the diagnosis's catalogue, and the README's tables the same.
Each recommendation's page (``nsysprobe/diagnose/pages.py``): ``test_explain_pages.py``."""

import ast
import re
from pathlib import Path

from click.testing import CliRunner

from nsysprobe.analyses.step_patterns import VERDICTS
from nsysprobe.cli import main
from nsysprobe.diagnose import rules
from nsysprobe.diagnose.rules import RULES

from conftest import analysis_modules

ROOT = Path(__file__).parents[2]
BEGIN = "<!-- nsysprobe explain --format markdown: begin -->\n"
END = "<!-- nsysprobe explain --format markdown: end -->"
# Modules of analyses/ that are tools of the others, not questions a report answers.


def invoke(*args):
    return CliRunner().invoke(main, ["explain", *args])


def test_the_readme_tables_are_the_command_output():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    result = invoke("--format", "markdown")
    assert result.exit_code == 0
    assert block == result.output


def test_an_analysis_is_its_module_docstring():
    doc = ast.get_docstring(ast.parse((ROOT / "nsysprobe/analyses/gaps.py").read_text()))
    result = invoke("gaps")
    assert result.exit_code == 0
    assert result.output == doc.strip() + "\n"


def test_every_analysis_module_and_every_recommendation_id_is_explained():
    listing = invoke().output.splitlines()
    listed = {line.split()[0]: line.split()[1] for line in listing}
    modules = analysis_modules()
    analyses = {n for n, kind in listed.items() if kind == "analysis"}
    assert len(analyses) == len(modules)  # one name per module (placement: cpu_placement)
    assert {n.replace("placement", "cpu_placement") for n in analyses} == modules
    # Every id the rules can give: a row of RULES with its check, or one that diagnose makes
    # itself (ROW.made(...)); each step pattern's verdict among them.
    source = (ROOT / "nsysprobe/diagnose/rules.py").read_text()
    made = {rule.id for rule in RULES if rule.check is not None}
    made |= {getattr(rules, row).id for row in re.findall(r"\b([A-Z_]+)\.made\(", source)}
    assert set(VERDICTS) <= made
    assert made == {rule.id for rule in RULES}
    assert made == {n for n, kind in listed.items() if kind == "recommendation"}


def test_a_recommendation_says_its_meaning_and_an_unknown_name_is_one_line():
    result = invoke("pinned_memory")
    assert result.output.startswith("pinned_memory: host-to-device copies from pageable memory")
    result = invoke("turbo")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith("nsysprobe: error: explain 'turbo': no analysis or")


def test_markdown_of_a_name_is_its_page_and_its_readme_row_is_the_page_s_first_line():
    result = invoke("gaps", "--format", "markdown")
    assert result.exit_code == 0
    assert result.output.startswith("## `gaps`\n\nGPU activity per device, and the step account")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = dict(
        re.findall(r"^\| `([a-z_]+)` \| (.*) \|$", readme.split(BEGIN, 1)[1].split(END)[0], re.M)
    )
    for name in ("host_sync", "gpu_bound", "periodic_step"):
        page = invoke(name, "--format", "markdown").output.split("\n\n")
        assert page[0] == f"## `{name}`"
        assert page[1] == rows[name].replace("\\|", "|")
        assert page[2] == "### When it fires"
