#!/usr/bin/env python3
"""How fast `rollstat view` opens a sweep and answers, against the naive alternative.

    python3 benches/view.py ROLLSTAT_BIN ROLLOUTS.jsonl [--inputs INPUTS.jsonl] [--pandas PYTHON]

Measures, on loopback:
- start: from launch to the printed URL (the index is built then), and the wall time of
  `aggregate --no-health-check` on the same file for the ratio; resident memory (VmRSS,
  VmHWM from /proc) once the SQL table is built and after the load run;
- per filter kind (none, slice, mean range, flips, text, SQL, sorted by mean), 50 requests
  for a page of 50 tasks at varying pages: p50 and p99 of the client-side time;
- a task page with all its rollouts, and each rollout card of it;
- a load run: 8 clients x 2,000 mixed requests (bounded), errors counted, p50/p99;
- with --pandas PYTHON (a Python with pandas): `pandas.read_json(path, lines=True)` of the
  same file, its time and peak memory.
Only standard-library Python; every request goes to 127.0.0.1.
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request


def rss(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) / 1024
    return out


def timed_get(url):
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        status = r.status
    return time.perf_counter() - t, status, body


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(x):
    return f"{x * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rollstat")
    ap.add_argument("rollouts")
    ap.add_argument("--inputs")
    ap.add_argument("--pandas", help="a Python interpreter that has pandas")
    a = ap.parse_args()
    extra = ["--inputs", a.inputs] if a.inputs else []

    t = time.perf_counter()
    subprocess.run([a.rollstat, "aggregate", "--no-health-check", a.rollouts, "--out", "/dev/null", "-q"] + extra,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agg = time.perf_counter() - t
    print(f"aggregate --no-health-check: {agg:.2f} s")

    t = time.perf_counter()
    p = subprocess.Popen([a.rollstat, "view", "--port", "0", a.rollouts] + extra, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    start = time.perf_counter() - t
    print(f"view: serving after {start:.2f} s ({start / agg:.2f}x aggregate); {url}")
    try:
        o = json.loads(urllib.request.urlopen(url + "api/overview").read())
        runs = [r["name"] for r in o["runs"]]
        # Wait for the SQL table.
        t = time.perf_counter()
        while True:
            try:
                urllib.request.urlopen(url + "api/tasks?size=1&sql=" + urllib.parse.quote('"mean/reward" >= 0'))
                break
            except urllib.error.HTTPError:
                time.sleep(0.1)
        print(f"SQL table ready {time.perf_counter() - t:.2f} s after serving; memory {rss(p.pid)}")
        cand = runs[1] if len(runs) > 1 else runs[0]
        tasks = o["tasks"]
        words = ["the", "prove", "find", "equation", "x"]
        kinds = {
            "none": lambda i: {},
            "slice": lambda i: {"run": runs[i % len(runs)], "slice": ["never", "sometimes", "always"][i % 3]},
            "mean range": lambda i: {"min": 0.2, "max": 0.8},
            "flips": lambda i: {"run": cand, "flip": ["fail-pass", "pass-fail"][i % 2]} if len(runs) > 1 else {},
            "text": lambda i: {"q": words[i % len(words)]},
            "sql": lambda i: {"sql": '"mean/reward" < 0.5 AND num_rollouts >= 2'},
            "sorted by mean": lambda i: {"sort": "mean", "order": "desc"},
        }
        print(f"\n{'filter':<16}{'p50':>10}{'p99':>10}  matches")
        for name, params in kinds.items():
            times = []
            total = 0
            for i in range(50):
                q = dict(params(i))
                q.update({"size": 50, "page": i % 5})
                dt, status, body = timed_get(url + "api/tasks?" + urllib.parse.urlencode(q))
                assert status == 200, body
                total = json.loads(body)["total"]
                times.append(dt)
            print(f"{name:<16}{ms(pct(times, 50)):>10}{ms(pct(times, 99)):>10}  {total}")
        task = json.loads(urllib.request.urlopen(url + "api/tasks?size=1&sort=rollouts&order=desc").read())["rows"][0]["task"]
        dt, _, body = timed_get(url + f"api/task/{task}")
        t = json.loads(body)
        cards = [timed_get(url + f"api/rollout/{r['id']}")[0] for r in t["rollouts"]]
        print(f"\ntask {task}: page {ms(dt)}; {len(cards)} rollout cards, slowest {ms(max(cards))}")

        # The load run.
        lat, errors = [], [0]
        lock = threading.Lock()

        def client(seed):
            rng = random.Random(seed)
            mine = []
            for i in range(2000):
                r = rng.random()
                if r < 0.5:
                    path = "api/tasks?" + urllib.parse.urlencode(dict(kinds[rng.choice(list(kinds))](i), size=50))
                elif r < 0.8:
                    path = f"api/task/{rng.randrange(tasks)}"
                elif r < 0.95:
                    path = f"api/rollout/{rng.randrange(o['rollouts'])}"
                else:
                    path = "api/overview"
                try:
                    dt, status, _ = timed_get(url + path)
                    mine.append(dt)
                except Exception:
                    with lock:
                        errors[0] += 1
            with lock:
                lat.extend(mine)

        t = time.perf_counter()
        threads = [threading.Thread(target=client, args=(s,)) for s in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t
        print(f"\nload: 8 clients x 2000 requests in {wall:.1f} s, {errors[0]} errors, "
              f"p50 {ms(pct(lat, 50))}, p99 {ms(pct(lat, 99))}; memory {rss(p.pid)}")
    finally:
        p.kill()
        p.wait()

    if a.pandas:
        code = ("import pandas, resource, sys, time; t = time.perf_counter(); "
                "df = pandas.read_json(sys.argv[1], lines=True); "
                "print(len(df), time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
        r = subprocess.run([a.pandas, "-c", code, a.rollouts], capture_output=True, text=True)
        if r.returncode == 0:
            n, secs, peak = r.stdout.split()
            print(f"\npandas.read_json(lines=True): {n} rows in {float(secs):.1f} s, peak {float(peak):.0f} MB")
        else:
            print(f"\npandas.read_json(lines=True) failed: {r.stderr.strip().splitlines()[-1:]}")


if __name__ == "__main__":
    main()
