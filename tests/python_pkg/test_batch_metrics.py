"""batch_metrics on a batch in memory, in every form it takes, against what the VAGEN
function returns (tests/fixtures/conformance/vagen) and what `rollstat batch-metrics`
prints for the same batch."""

import glob
import json
import math
import os

import numpy as np
import pyarrow as pa
import pytest

import rollstat

from conftest import FIXTURES, need, run


def cases():
    out = sorted(glob.glob(os.path.join(FIXTURES, "vagen", "*", "batch.jsonl")))
    assert len(out) >= 7, out
    return out


def rows_of(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def columns_of(rows):
    return {"group_idx": [r["group_idx"] for r in rows], "token_level_scores": [r["token_level_scores"] for r in rows]}


def numpy_of(rows):
    """numpy columns: typed group ids where one dtype holds them all (else an object
    array, as VAGEN's non-tensor batch holds them); scores as a 2-D array when the rows
    have one length, else one array per row."""
    ids = [r["group_idx"] for r in rows]
    kinds = {type(i) for i in ids}
    if kinds == {int}:
        g = np.array(ids, dtype=np.int64)
    elif kinds == {float}:
        g = np.array(ids, dtype=np.float64)
    else:
        g = np.array(ids, dtype=object)
    lengths = {len(r["token_level_scores"]) for r in rows}
    if len(lengths) == 1 and rows:
        s = np.array([r["token_level_scores"] for r in rows], dtype=np.float64)
    else:
        s = [np.array(r["token_level_scores"], dtype=np.float64) for r in rows]
    return {"group_idx": g, "token_level_scores": s}


def close(a, b):
    if math.isnan(b):
        return math.isnan(a)
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


FORMS = ["rows", "columns", "numpy", "arrow"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("path", cases(), ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_vagen_case(path, form):
    with open(os.path.join(os.path.dirname(path), "expected.json")) as f:
        want = json.load(f)
    rows = rows_of(path)
    if form == "rows":
        batch = rows
    elif form == "columns":
        batch = columns_of(rows)
    elif form == "numpy":
        batch = numpy_of(rows)
    else:
        kinds = {type(r["group_idx"]) for r in rows}
        if len(kinds) > 1:
            pytest.skip("an Arrow column holds one type; this batch mixes id types")
        batch = pa.Table.from_pylist(rows) if rows else pa.table({"group_idx": pa.array([], pa.int64()),
                                                                  "token_level_scores": pa.array([], pa.list_(pa.float64()))})
    got = rollstat.batch_metrics(batch, metrics=["reward_variance", "mean_reward"])
    assert close(got["custom_metrics/train/reward_variance"], want["reward_variance"])
    if want["rows"]:
        assert close(got["custom_metrics/train/mean_reward"], want["mean_reward"])
    got1 = rollstat.batch_metrics(batch, metrics=["reward_variance"], ddof=1, prefix="p")
    assert close(got1["p/reward_variance"], want["reward_variance_ddof1"])
    # The same numbers, and the same keys in the same order, as the command on the file.
    cli = json.loads(run("batch-metrics", path).stdout)
    full = rollstat.batch_metrics(batch)
    assert list(full) == list(cli)
    for k, v in cli.items():
        assert (v is None and math.isnan(full[k])) or close(full[k], v), k


def test_polars_frame_and_record_batch():
    pl = need("polars")
    rows = rows_of(next(c for c in cases() if "int_groups" in c))
    want = rollstat.batch_metrics(rows)
    assert rollstat.batch_metrics(pl.DataFrame(rows)) == want
    assert rollstat.batch_metrics(pa.RecordBatch.from_pylist(rows)) == want


def test_groups_by_str_as_vagen_does():
    # 1 and "1" are one group; 1, 1.0 and True are three.
    got = rollstat.batch_metrics({"group_idx": [1, "1", 1.0, True], "reward": [1.0, 0.0, 1.0, 1.0]},
                                 metrics=["reward_variance"])
    assert got["custom_metrics/train/reward_variance"] == pytest.approx(0.25 / 3)


def test_rewards_and_float32_tokens():
    g = np.array([0, 0, 1, 1], dtype=np.int64)
    r = np.array([1.0, 0.0, 1.0, 1.0])
    assert rollstat.batch_metrics({"group_idx": g, "reward": r}) == rollstat.batch_metrics(
        [{"group_idx": int(a), "reward": float(b)} for a, b in zip(g, r)])
    tokens32 = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], dtype=np.float32)
    got = rollstat.batch_metrics({"uid": g, "token_level_scores": tokens32}, metrics=["mean_reward"])
    want = float(np.mean(tokens32.sum(axis=-1)))
    assert got["custom_metrics/train/mean_reward"] == want


def test_bad_batches_raise_input_error():
    with pytest.raises(rollstat.InputError) as e:
        rollstat.batch_metrics([{"group_idx": 1, "token_level_scores": [1.0, "x"]}])
    assert e.value.line == 1 and e.value.key == "token_level_scores"
    with pytest.raises(rollstat.InputError):
        rollstat.batch_metrics({"group_idx": [1, 2], "reward": [1.0]})
    with pytest.raises(rollstat.InputError):
        rollstat.batch_metrics({"reward": [1.0]})
    with pytest.raises(rollstat.InputError):
        rollstat.batch_metrics(pa.table({"x": [1]}))
    with pytest.raises(rollstat.InputError):
        rollstat.batch_metrics(42)
    with pytest.raises(rollstat.InputError):
        rollstat.batch_metrics([{"group_idx": 1, "reward": 1.0}], metrics=["no_such_metric"])
