"""`rollstat.view`: the viewer on a background thread, answering what the command's
server answers, stopped on request; wrong argument types are TypeErrors."""

import json
import urllib.error
import urllib.request

import pytest

import rollstat


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_view_serves_the_runs_and_stops(sweep):
    rollouts, inputs = sweep
    with rollstat.view(rollouts, inputs=[inputs]) as v:
        assert v.running and v.url.startswith("http://127.0.0.1:")
        o = fetch(v.url + "api/overview")
        lines = [json.loads(x) for x in open(rollouts, encoding="utf-8") if x.strip()]
        assert o["rollouts"] == len(lines)
        assert sorted(r["name"] for r in o["runs"]) == sorted({x["agent_ref"]["name"] for x in lines})
        page = fetch(v.url + "api/tasks?slice=never&size=5")
        assert page["total"] == o["runs"][0]["slices"]["never"]
        assert '<iframe src="http://127.0.0.1:' in v._repr_html_()
        url = v.url
    assert not v.running
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "api/overview", timeout=5)
    v.stop()  # twice is fine


def test_view_refuses_wrong_types_and_bad_files(sweep, tmp_path):
    rollouts, _ = sweep
    with pytest.raises(TypeError, match="port"):
        rollstat.view(rollouts, port="8000")
    with pytest.raises(TypeError, match="host"):
        rollstat.view(rollouts, host=127)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reward": 1.0,\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.view(bad)
    assert e.value.path is not None and "bad.jsonl" in str(e.value.path)


def test_view_judges_health_and_serves_a_lake(sweep, tmp_path):
    rollouts, inputs = sweep
    with rollstat.view(rollouts, inputs=[inputs]) as v:
        health = fetch(v.url + "api/overview")["runs"][0]["health"]
        assert health is not None and sum(health[k] for k in ("healthy", "unhealthy", "unobserved")) > 0
    with rollstat.view(rollouts, health_check=False) as v:
        assert fetch(v.url + "api/overview")["runs"][0]["health"] is None
    with pytest.raises(TypeError, match="health_check"):
        rollstat.view(rollouts, health_check="no")
    lake = tmp_path / "lake"
    sweep_id = rollstat.export(rollouts, inputs=inputs, lake=str(lake))
    with rollstat.view(lake=str(lake), health_check=False) as v:
        o = fetch(v.url + "api/overview")
        assert o["runs"] and all(r["name"].split("/")[0] == sweep_id for r in o["runs"])
        assert [s["sweep"] for s in o["lake"]["sweeps"]] == [sweep_id]
    with pytest.raises(rollstat.InputError, match="lake"):
        rollstat.view(rollouts, lake=str(lake))


def test_a_lake_sweep_whose_file_is_gone_still_browses(sweep, tmp_path):
    rollouts, _ = sweep
    copy = tmp_path / "run.jsonl"
    copy.write_bytes(open(rollouts, "rb").read())
    lake = tmp_path / "lake"
    sweep_id = rollstat.export(str(copy), lake=str(lake))
    with rollstat.view(lake=str(lake), health_check=False) as v:
        before = fetch(v.url + "api/overview")
    copy.unlink()
    with rollstat.view(lake=str(lake), health_check=False) as v:
        after = fetch(v.url + "api/overview")
        assert [r["mean"] for r in after["runs"]] == [r["mean"] for r in before["runs"]]
        assert any(f"sweep {sweep_id} is served from the lake's tables" in n for n in after["notes"])
        task = fetch(v.url + "api/tasks?size=1")["rows"][0]["task"]
        card = fetch(v.url + "api/rollout/" + str(fetch(v.url + f"api/task/{task}")["rollouts"][0]["id"]))
        assert "run.jsonl: missing" in card["unavailable"]
