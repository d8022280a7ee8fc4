"""JSON text written as ``json.dumps(value, indent=2, ensure_ascii=False)`` writes it
(``nsysprobe/common/jsontext.py``): the standard library's own output is the reference."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysprobe.common.jsontext import dumps

from conftest import SAMPLE_TRACES

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # any code point: quotes, backslashes, control characters, non-ASCII
)
KEYS = st.one_of(st.text(), st.integers(), st.floats(), st.booleans(), st.none())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(KEYS, inner, max_size=5),
    ),
    max_leaves=40,
)


@settings(max_examples=400)
@given(VALUES)
def test_any_value_is_written_as_the_standard_library_writes_it(value):
    assert dumps(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_report_is_written_as_the_standard_library_writes_it():
    import nsysprobe
    from nsysprobe.report.saved import report_dict

    data = report_dict(nsysprobe.analyze(SAMPLE_TRACES / "h200_pinned.sqlite"))
    assert dumps(data) == json.dumps(data, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("value", [{"a": object()}, [1, {2: [object()]}], {(1, 2): 3}])
def test_a_value_json_cannot_write_fails_as_it_does(value):
    with pytest.raises(TypeError):
        json.dumps(value, indent=2, ensure_ascii=False)
    with pytest.raises(TypeError):
        dumps(value)
