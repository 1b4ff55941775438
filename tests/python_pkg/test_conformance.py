"""The conformance corpus's profile and aggregate cases through the API, against what
NeMo Gym 0.7.0 wrote: same structure and key order, ints as ints, floats within 1e-12
relative; a refusal of NeMo Gym's is an InputError here."""

import glob
import json
import math
import os

import pytest

import rollstat

from conftest import FIXTURES, example_cases, need_examples


def cases():
    """The constructed and generated cases of the repository, then those on NeMo Gym's
    example files when their folder is there."""
    out = []
    for group in ("constructed", "generated"):
        out += sorted(p for p in glob.glob(os.path.join(FIXTURES, group, "*")) if os.path.exists(os.path.join(p, "case.json")))
    assert len(out) >= 22, out
    return out + example_cases("nemo_gym_examples")


def oracle(case, key):
    return load(os.path.join(case, "case.json")).get("oracle", {}).get(key)


def aggregate_cases():
    return [c for c in cases() if oracle(c, "aggregate")]


def profile_cases():
    """(case, allow_partial) for every profile oracle of a case with materialized inputs."""
    return [(c, partial) for c in cases() for partial in (False, True)
            if oracle(c, "profile-partial" if partial else "profile")
            and os.path.exists(os.path.join(c, "materialized_inputs.jsonl"))]


def same(got, want, where="$"):
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert type(got) is float, f"{where}: {got!r} is not a float like {want!r}"
        if math.isnan(want):
            assert math.isnan(got), where
        else:
            assert got == want or abs(got - want) <= 1e-12 * max(abs(want), abs(got)), f"{where}: {got!r} != {want!r}"
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def load(p):
    with open(p) as f:
        if p.endswith(".jsonl"):
            return [json.loads(x) for x in f if x.strip()]
        return json.load(f)


def agent_of(args):
    return args[args.index("--agent") + 1] if "--agent" in args else None


@pytest.mark.parametrize("case", aggregate_cases(), ids=os.path.basename)
def test_aggregate_case(case):
    c = load(os.path.join(case, "case.json"))
    verdict = c["oracle"]["aggregate"]
    inputs = os.path.join(case, "materialized_inputs.jsonl")
    kw = dict(inputs=inputs if os.path.exists(inputs) else None, agent=agent_of(c["oracle"].get("aggregate_args", [])))
    exp = os.path.join(case, "expected", "aggregate")
    if verdict == "error":
        with pytest.raises(rollstat.InputError):
            rollstat.aggregate(os.path.join(case, "rollouts.jsonl"), **kw)
        return
    want = load(os.path.join(exp, "rollouts_aggregate_metrics.json"))
    try:
        got = rollstat.aggregate(os.path.join(case, "rollouts.jsonl"), **kw)
    except rollstat.InputError:
        # Where NeMo Gym silently wrote `[]`, rollstat refuses and says why.
        assert want == []
        return
    same(got.metrics, want)


@pytest.mark.parametrize("case,partial", profile_cases(),
                         ids=lambda x: os.path.basename(x) if isinstance(x, str) else ("partial" if x else "strict"))
def test_profile_case(case, partial):
    key = "profile-partial" if partial else "profile"
    verdict = oracle(case, key)
    inputs = os.path.join(case, "materialized_inputs.jsonl")
    rollouts = os.path.join(case, "rollouts.jsonl")
    if verdict == "error":
        with pytest.raises(rollstat.InputError):
            rollstat.profile(rollouts, inputs, allow_partial=partial)
        return
    got = rollstat.profile(rollouts, inputs, allow_partial=partial)
    exp = os.path.join(case, "expected", key)
    same(got.reward_profile, load(os.path.join(exp, "rollouts_reward_profiling.jsonl")))
    same(got.agent_metrics, load(os.path.join(exp, "rollouts_agent_metrics.json")))
    same(got.repeat_level_metrics, load(os.path.join(exp, "rollouts_repeat_level_metrics.json")))


def test_nemo_gym_example_cases_ran():
    """The cases on NeMo Gym's example files are among those above when their folder is
    there; without it this test is skipped, saying so."""
    need_examples("nemo_gym_examples")
    ran = [c for c in cases() if "nemo_gym_examples" in c]
    assert len(ran) > 30, ran
    assert any(c in aggregate_cases() for c in ran) and any(c in [p for p, _ in profile_cases()] for c in ran)
