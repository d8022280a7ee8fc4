"""The tables and groupings of ``nsysprobe.common.table`` against pandas, the independent
model: the orders the analyses printed when they grouped and sorted with pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsysprobe.common import table
from nsysprobe.common.table import (
    Groups,
    Labels,
    Table,
    by_count,
    concat,
    descending,
    distinct,
    distinct_first_which,
    first_seen,
    percentile,
    ranked,
)

small_ints = st.lists(st.integers(-3, 3), max_size=60)
# Sums with many ties and long enough arrays (over 16) for numpy's quicksort not to be an
# insertion sort, the case where the order of ties is not simply stable.
tied = st.lists(st.integers(0, 4), min_size=0, max_size=200)
words = st.lists(st.sampled_from(["b", "a", "cuda", "", "a#"]), max_size=60)


@given(tied)
def test_descending_orders_ties_as_pandas_sort_values(values):
    v = np.array(values, dtype=np.int64)
    expected = pd.Series(v).sort_values(ascending=False).index.to_numpy()
    assert descending(v).tolist() == expected.tolist()


@given(st.lists(st.integers(0, 40), max_size=120))
def test_by_count_is_the_order_of_value_counts(values):
    # Up to 41 distinct values with tied counts: pandas sorts the counts stably.
    v = np.array(values, dtype=np.int64)
    assert by_count(v).tolist() == pd.Series(v).value_counts().index.tolist()


@given(small_ints)
def test_first_seen_is_factorize(values):
    v = np.array(values, dtype=np.int64)
    codes, uniques = pd.factorize(v)
    distinct, which = first_seen(v)
    assert distinct.tolist() == uniques.tolist()
    assert which.tolist() == codes.tolist()


@given(st.data())
def test_groups_sum_count_min_max_in_the_order_pandas_groups(data):
    n = data.draw(st.integers(0, 60))
    a = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)), dtype=np.int64)
    b = np.array(data.draw(st.lists(st.sampled_from(["x", "y", ""]), min_size=n, max_size=n)))
    b = b.astype(object)
    v = np.array(
        data.draw(st.lists(st.integers(-(10**12), 10**12), min_size=n, max_size=n)), dtype=np.int64
    )
    sort = data.draw(st.booleans())
    frame = pd.DataFrame({"a": a, "b": b, "v": v})
    expected = frame.groupby(["a", "b"], sort=sort)["v"].agg(["sum", "size", "min", "max"])
    groups = Groups([a, b], sort=sort)
    got = list(zip(groups.keys[0].tolist(), groups.keys[1].tolist()))
    assert got == list(expected.index)
    assert groups.sum(v).tolist() == expected["sum"].tolist()
    assert groups.count().tolist() == expected["size"].tolist()
    assert groups.min(v).tolist() == expected["min"].tolist()
    assert groups.max(v).tolist() == expected["max"].tolist()
    # each row's group holds its keys
    assert all(
        (groups.keys[0][g], groups.keys[1][g]) == (x, y)
        for g, x, y in zip(groups.of_row.tolist(), a.tolist(), b.tolist())
    )


@given(words)
def test_labels_compare_and_take_as_the_texts_they_stand_for(texts):
    categories = sorted(set(texts))
    codes = np.array([categories.index(t) for t in texts], dtype=np.int32)
    labels = Labels(codes, categories)
    assert labels.values().tolist() == texts
    for text in ["a", "b", "zzz"]:
        assert (labels == text).tolist() == [t == text for t in texts]
    assert labels.isin(["a", ""]).tolist() == [t in ("a", "") for t in texts]
    rows = np.arange(len(texts))[::-2]
    assert labels.take(rows).values().tolist() == [texts[i] for i in rows]


def test_a_table_takes_rows_of_every_column_and_refuses_ragged_columns():
    t = Table(
        {"start": np.array([5, 1, 3]), "pattern": Labels(np.array([1, 0, 1]), ["a", "b"])},
        dropped=2,
    )
    sub = t.take(np.array([2, 0]))
    assert sub["start"].tolist() == [3, 5]
    assert sub["pattern"].values().tolist() == ["b", "b"]
    assert t.take(t["start"] > 2)["start"].tolist() == [5, 3]
    assert len(t.head(0)) == 0 and t.head(0).columns == ["start", "pattern"]
    with pytest.raises(ValueError, match="different lengths"):
        Table({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="has 1 rows"):
        t["end"] = np.zeros(1)


def test_concat_adds_up_the_rows_left_out():
    a = Table({"start": np.array([1])}, dropped=2)
    b = Table({"start": np.array([2, 3])}, dropped=5)
    both = concat([a, b])
    assert both["start"].tolist() == [1, 2, 3] and both.dropped == 7


def test_groups_of_many_keys_with_many_values_do_not_wrap_around():
    # 5 keys of about 10,000 distinct values each: 2^66 combinations, past int64, so the
    # combined keys are ranked again on the way; pandas groups the same rows.
    rng = np.random.default_rng(7)
    keys = [rng.integers(-(1 << 40), 1 << 40, 12_000) for _ in range(5)]
    keys = [np.concatenate([k, k[:3000]]) for k in keys]  # groups of two rows, too
    v = rng.integers(0, 1000, keys[0].size)
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)} | {"v": v})
    names = [f"k{i}" for i in range(5)]
    for sort in (True, False):
        expected = frame.groupby(names, sort=sort)["v"].sum()
        groups = Groups(keys, sort=sort)
        assert list(zip(*(k.tolist() for k in groups.keys))) == list(expected.index)
        assert groups.sum(v).tolist() == expected.tolist()


@given(st.lists(st.integers(0, 300), max_size=80), st.sampled_from([None, 301, 1 << 17]))
def test_ranked_gives_the_distinct_values_sorted_and_each_ones_index(values, size):
    # size 301 marks the values in a table; None and 2^17 (more than the values) sort them.
    v = np.array(values, dtype=np.int64)
    distinct, which = ranked(v, size)
    assert distinct.tolist() == sorted(set(values))
    assert distinct[which].tolist() == values


@given(st.lists(st.integers(-(1 << 62), 1 << 62) | st.integers(-3, 3), max_size=80))
def test_distinct_is_the_sorted_set_of_the_values(values):
    got = distinct(np.array(values, dtype=np.int64))
    assert got.dtype == np.int64 and got.tolist() == sorted(set(values))


@given(
    st.lists(st.integers(0, 10**12) | st.integers(0, 5), min_size=1, max_size=60),
    st.sampled_from([0, 10, 25, 50, 90, 100, 33.3]),
)
def test_percentile_is_numpys_to_the_last_bit(values, q):
    # numpy's own percentile is the model (windows.py printed it before); Python's
    # statistics.quantiles(method="inclusive") is the same definition, computed apart.
    import statistics

    v = np.array(values, dtype=np.int64)
    assert percentile(v, q) == float(np.percentile(v, q))
    if len(values) > 1 and q in (10, 25, 50, 90):
        cut = statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        assert percentile(v, q) == pytest.approx(cut, rel=1e-12, abs=1e-6)


@given(st.lists(st.sampled_from(["HtoD", "DtoH", "Pageable", "", "a#", "cudaMemcpy"]), max_size=60))
def test_ranked_labels_are_np_uniques_distinct_and_inverse(values):
    v = np.array(values, dtype=object)
    distinct, which = ranked(v)
    expected, inverse = np.unique(v, return_inverse=True)
    assert distinct.dtype == object and distinct.tolist() == expected.tolist()
    assert which.tolist() == inverse.reshape(-1).tolist()


@given(
    st.lists(st.integers(-(1 << 40), 1 << 40) | st.integers(-5, 5), max_size=80),
    st.sampled_from([np.int64, np.int32, np.uint16]),
)
def test_ranked_integers_are_np_uniques_distinct_and_inverse(values, dtype):
    # A narrow range is marked in a table (offset by its least value), a wide one sorted:
    # either way numpy's distinct values, of the values' type, and inverse.
    v = np.array(values, dtype=np.int64)
    if dtype is not np.int64:
        v = (v % 30_000 if dtype is np.uint16 else v % (1 << 31) - (1 << 30)).astype(dtype)
    distinct, which = ranked(v)
    expected, inverse = np.unique(v, return_inverse=True)
    assert distinct.dtype == expected.dtype and distinct.tolist() == expected.tolist()
    assert which.tolist() == inverse.reshape(-1).tolist()


@given(
    st.lists(st.tuples(st.integers(-3, 3), st.integers(1, 40)), min_size=1, max_size=60),
    st.sampled_from([np.int64, np.int32, np.uint8, bool]),
)
def test_distinct_values_found_by_their_runs_are_those_np_unique_finds(runs, dtype):
    # Runs of equal values (a thread's calls one after another): long runs take the path
    # that sorts only each run's first value, short ones np.unique's own; both give what
    # np.unique gives.
    values = np.repeat([v for v, _ in runs], [n for _, n in runs]).astype(dtype)
    table.RUNS_FROM, old = 8, table.RUNS_FROM
    try:
        got = distinct_first_which(values)
    finally:
        table.RUNS_FROM = old
    for mine, theirs in zip(got, np.unique(values, return_index=True, return_inverse=True)):
        assert mine.tolist() == theirs.reshape(-1).tolist()


def test_distinct_values_of_a_table_of_rows_are_those_of_its_values_in_a_row():
    # np.unique reads a 2-D array as its values one after another.
    values = np.zeros((4096, 2), np.int64)
    values[100:, 1] = 7
    for mine, theirs in zip(
        distinct_first_which(values), np.unique(values, return_index=True, return_inverse=True)
    ):
        assert mine.tolist() == theirs.reshape(-1).tolist()
