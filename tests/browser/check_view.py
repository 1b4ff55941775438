#!/usr/bin/env python3
"""Drives `rollstat view` in headless Chromium as a user would, over the DevTools
protocol (the pipe client of check_report.py; Python's standard library only).

On a generated sweep: open the overview; follow a never-solved count; filter by text, by
SQL and by flips; open a task; open a side-by-side pair; reload a deep link; append lines
to a served file and see them after a reload. On rollouts whose trajectories trip the
health checks: follow a check's count and see the verdict on a task's rollouts. On a
hand-made rollout holding every
transcript item type and hostile text: each item type is drawn, and nothing it carries
runs (no dialog, no element it injected, no script, the title unchanged). A non-loopback
bind answers 403 without its token. Screenshots go to --shots.

usage: check_view.py ROLLSTAT_BIN --shots DIR [--chromium /usr/bin/chromium]
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_report import Browser, variance  # noqa: E402

HOSTILE_TEXT = ('<script>window.__pwned=1;alert(1)</script><img src=x onerror="window.__pwned=2;alert(2)">'
                '<a href="javascript:alert(3)">click</a><style>body{display:none}</style>'
                '\u202eevil right-to-left</title><title>pwned</title>')


def hostile_rollout():
    """One rollout with every transcript item type, hostile text in each, a long string
    and many items."""
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking " + HOSTILE_TEXT}]},
        {"type": "function_call", "name": "search<img src=x onerror=alert(4)>", "call_id": "call_1",
         "arguments": json.dumps({"query": HOSTILE_TEXT, "k": 3})},
        {"type": "function_call_output", "call_id": "call_1", "output": "result " + HOSTILE_TEXT},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "answer " + HOSTILE_TEXT + " " + "y" * 300_000}]},
        {"type": "web_search_call<svg onload=alert(5)>", "status": HOSTILE_TEXT},
    ]
    output += [{"type": "function_call", "name": f"step{i}", "call_id": f"c{i}", "arguments": "{}"} for i in range(3000)]
    return {
        "responses_create_params": {"input": [
            {"role": "system", "content": "system " + HOSTILE_TEXT},
            {"role": "user", "content": "question " + HOSTILE_TEXT}]},
        "response": {"output": output, "usage": {"input_tokens": 10, "output_tokens": 20}},
        "reward": 0.0,
        "verifier_note": HOSTILE_TEXT,
        HOSTILE_TEXT: "a hostile field name",
        "agent_ref": {"name": "agent" + HOSTILE_TEXT},
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
    }


class View:
    """A running `rollstat view`."""

    def __init__(self, binary, args):
        self.proc = subprocess.Popen([binary, "view", "--port", "0"] + args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError(f"rollstat view printed {self.url!r}: {self.proc.stderr.read()}")

    def close(self):
        self.proc.kill()
        self.proc.wait()


class Page:
    def __init__(self, browser, failures):
        self.b = browser
        self.failures = failures
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for m in ["Page.enable", "Runtime.enable", "Log.enable"]:
            browser.call(m, session=self.s)
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=self.s)

    def js(self, expr):
        r = self.b.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                        session=self.s)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def wait(self, expr, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                v = self.js(expr)
            except RuntimeError:
                v = None  # the page is being replaced
            if v:
                return v
            time.sleep(0.1)
        raise TimeoutError(f"waited {timeout} s for {what}; the page says: {self.js('document.body.innerText')[:500]}")

    def ready(self, hash_part=""):
        """Waits until the page drew the view of the current URL."""
        return self.wait(
            "document.getElementById('main') && document.getElementById('main').hasAttribute('data-ready')"
            f" && location.hash.includes({json.dumps(hash_part)})", f"the view {hash_part!r}")

    def go(self, url):
        self.js("document.getElementById('main') && document.getElementById('main').removeAttribute('data-ready')")
        nav = self.b.call("Page.navigate", {"url": url}, session=self.s)
        if nav.get("errorText"):
            self.failures.append(f"navigation to {url} failed: {nav['errorText']}")

    def reload(self):
        self.js("document.getElementById('main').removeAttribute('data-ready')")
        self.b.call("Page.reload", {"ignoreCache": True}, session=self.s)

    def hash(self, h):
        self.js("document.getElementById('main').removeAttribute('data-ready'); location.hash = " + json.dumps(h))
        self.ready(h.split("?")[0])

    def matches(self):
        text = self.wait("document.getElementById('matches') && document.getElementById('matches').innerText",
                         "the count of matches")
        return int(text.split()[0])

    def shot(self, path):
        h = self.js("document.documentElement.scrollHeight")
        shot = self.b.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": 1280, "height": min(h, 4000), "scale": 1}}, session=self.s, timeout=120)
        png = base64.b64decode(shot["data"])
        with open(path, "wb") as f:
            f.write(png)
        if variance(png) < 50:
            self.failures.append(f"screenshot {path} looks blank")
        print(f"  screenshot {path}")


def check(cond, failures, what):
    if cond:
        print("  ok: " + what)
    else:
        failures.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rollstat")
    ap.add_argument("--shots", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    os.makedirs(a.shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="rollstat-view-")
    failures = []
    servers = []
    profile = os.path.join(work, "chromium")
    b = Browser(a.chromium, profile)
    try:
        subprocess.run([a.rollstat, "generate", "-q", "--tasks", "80", "--repeats", "4", "--agents", "2", "--fan-out",
                        "--seed", "5", "--out-dir", os.path.join(work, "sweep")], check=True, stdout=subprocess.DEVNULL)
        rollouts = os.path.join(work, "sweep", "rollouts.jsonl")
        lines = open(rollouts, encoding="utf-8").read().splitlines(keepends=True)
        growing = os.path.join(work, "growing.jsonl")
        with open(growing, "w", encoding="utf-8") as f:
            f.writelines(lines[: len(lines) // 2])
        sweep = View(a.rollstat, [growing])
        servers.append(sweep)
        p = Page(b, failures)

        # The overview, then a never-solved count followed.
        p.go(sweep.url)
        p.ready()
        runs = p.js("document.querySelectorAll('#runs tbody tr').length")
        check(runs == 2, failures, f"the overview lists the 2 runs ({runs})")
        p.shot(os.path.join(a.shots, "view-overview.png"))
        never = p.js("document.querySelector('#runs tbody tr td:nth-child(6) a').innerText")
        p.js("document.getElementById('main').removeAttribute('data-ready');"
             "document.querySelector('#runs tbody tr td:nth-child(6) a').click()")
        p.ready("slice=never")
        check(p.matches() == int(never), failures, f"the never-solved link lists its {never} tasks")

        # Filters: text, SQL, flips.
        p.hash("#/tasks")
        word = p.js("Array.from(document.querySelectorAll('#tasks tbody tr td.prompt-cell'))"
                    ".flatMap(x => x.innerText.split(/\\s+/)).filter(w => /^[A-Za-z]{4,}$/.test(w))"
                    ".sort((x, y) => y.length - x.length)[0]")
        p.hash("#/tasks?q=" + urllib.parse.quote(word.upper()))
        check(p.matches() >= 1, failures, f"the text filter {word.upper()!r} finds tasks")
        for attempt in range(100):
            p.hash("#/tasks?sql=" + urllib.parse.quote('"mean/reward" >= 0.5') + f"&try={attempt}")
            if not p.js("!!document.querySelector('.error')"):
                break
            time.sleep(0.2)
        check(p.matches() >= 1, failures, "the SQL filter finds tasks")
        p.hash("#/tasks?sql=" + urllib.parse.quote("no_such_column > 1"))
        err = p.wait("document.querySelector('.error') && document.querySelector('.error').innerText", "the SQL error")
        check(err.startswith("sql:"), failures, "a bad SQL expression is a message on the page")
        names = json.loads(urllib.request.urlopen(sweep.url + "api/overview").read())["runs"]
        cand = names[1]["name"]
        p.hash("#/tasks?run=" + urllib.parse.quote(cand) + "&flip=pass-fail")
        check(p.matches() == names[1]["vs_baseline"]["pass_fail"], failures, "the flips filter lists the overview's count")

        # A task, a side-by-side pair, a deep link reloaded.
        p.hash("#/tasks?sort=mean")
        p.js("document.getElementById('main').removeAttribute('data-ready');"
             "document.querySelector('#tasks tbody tr td a').click()")
        p.ready("/task/")
        p.wait("!!document.querySelector('#cards .card.rollout')", "a rollout card")
        check(p.js("document.querySelectorAll('#cards .item.message').length") >= 1, failures, "a task shows its transcript")
        task_hash = p.js("location.hash")
        ids = p.js("Array.from(document.querySelectorAll('#rollouts a')).filter(x => x.innerText === 'A')"
                   ".map(x => new URLSearchParams(x.getAttribute('href').split('?')[1]).get('a'))")
        pair = task_hash.split("?")[0] + f"?a={ids[0]}&b={ids[-1]}"
        p.hash(pair)
        p.wait("document.querySelectorAll('#cards .card.rollout').length === 2", "two cards side by side")
        p.shot(os.path.join(a.shots, "view-pair.png"))
        p.reload()
        p.ready(pair.split("?")[0])
        p.wait("document.querySelectorAll('#cards .card.rollout').length === 2", "the pair after a reload")
        check(True, failures, "a deep link to a pair opens the pair after a reload")

        # Lines appended to the served file show after a reload.
        before = json.loads(urllib.request.urlopen(sweep.url + "api/overview").read())["rollouts"]
        with open(growing, "a", encoding="utf-8") as f:
            f.writelines(lines[len(lines) // 2:])
        p.hash("#/")
        p.reload()
        p.ready()
        text = p.wait("document.querySelector('main p.note') && document.querySelector('main p.note').innerText",
                      "the overview's counts")
        check(text.startswith(f"{len(lines)} rollouts"), failures,
              f"after appending, the overview counts {len(lines)} rollouts (was {before})")

        # Every item type, and hostile text that must stay text.
        hostile = os.path.join(work, "hostile.jsonl")
        with open(hostile, "w", encoding="utf-8") as f:
            f.write(json.dumps(hostile_rollout()) + "\n")
        bad = View(a.rollstat, [hostile])
        servers.append(bad)
        dialogs_before = sum(1 for e in b.events if e.get("method") == "Page.javascriptDialogOpening")
        p.go(bad.url + "#/task/0")
        p.ready("/task/0")
        p.wait("!!document.querySelector('#cards .card.rollout')", "the hostile rollout's card")
        for kind in ["message", "reasoning", "function_call", "function_call_output", "other"]:
            n = p.js(f"document.querySelectorAll('#cards .item.{kind}').length")
            check(n >= 1, failures, f"the transcript draws a {kind} item ({n})")
        more = p.js("!!Array.from(document.querySelectorAll('button.more')).find(x => x.innerText.startsWith('show all'))")
        check(more, failures, "a long text folds with 'show all'")
        p.js("Array.from(document.querySelectorAll('button.more')).find(x => x.innerText.startsWith('show the next')).click()")
        p.wait("document.querySelectorAll('#cards .item').length >= 200", "the next page of items")
        p.go(bad.url + "#/")
        p.ready()
        p.go(bad.url + "#/rollout/0")
        p.ready("/rollout/0")
        p.wait("document.getElementById('raw') && document.getElementById('raw').innerText.length > 1000", "the raw JSON")
        p.go(bad.url + "#/task/0")
        p.ready("/task/0")
        p.wait("!!document.querySelector('#cards .card.rollout')", "the card again")
        p.shot(os.path.join(a.shots, "view-hostile.png"))
        dialogs = sum(1 for e in b.events if e.get("method") == "Page.javascriptDialogOpening") - dialogs_before
        check(dialogs == 0, failures, "no dialog opened")
        check(p.js("window.__pwned === undefined"), failures, "no injected script ran")
        check(p.js("document.querySelectorAll('img, svg, style, iframe, main script, main title').length") == 0,
              failures, "no element the rollout carried was created")
        check(p.js("document.scripts.length") == 1, failures, "the page's one script only")
        check(p.js("document.title") == "rollstat view", failures, "the title is unchanged")
        check(p.js("Array.from(document.querySelectorAll('a')).every(x => x.getAttribute('href').startsWith('#') || "
                   "x.getAttribute('href').startsWith('/'))"), failures, "no link leaves the page")
        check(p.js("getComputedStyle(document.body).display") != "none", failures, "hostile CSS did not apply")
        for e in b.events:
            m, prm = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                failures.append(f"uncaught exception: {prm.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and "Content Security Policy" in prm.get("entry", {}).get("text", ""):
                failures.append(f"the page broke its own policy: {prm['entry']['text']}")

        # Health: the verdicts by check, a check's count followed, a card's verdict.
        case = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "fixtures", "conformance", "gym_aggregate", "health", "rollout_checks", "rollouts.jsonl")
        sick = View(a.rollstat, [case])
        servers.append(sick)
        p.go(sick.url)
        p.ready()
        p.wait("document.querySelectorAll('#runs td.health ul.checks a').length >= 10", "the health checks' links")
        link = "Array.from(document.querySelectorAll('#runs td.health ul.checks a')).find(x => x.innerText === 'model_call_failed')"
        tasks_flagged = json.loads(urllib.request.urlopen(sick.url + "api/overview").read())["runs"][0]["health"]["checks"]["model_call_failed"]["tasks"]
        p.js(link + ".click()")
        p.ready("check=model_call_failed")
        check(p.matches() == tasks_flagged, failures, f"a health check's link lists its {tasks_flagged} tasks")
        first = p.js("document.querySelector('#tasks tbody tr td a').innerText")
        p.js("document.querySelector('#tasks tbody tr td a').click()")
        p.ready("/task/" + first)
        p.wait("!!document.querySelector('#cards .card.rollout .health-verdict')", "a card's health verdict")
        check("model_call_failed" in p.js("document.querySelector('#rollouts').innerText"), failures,
              "the task's rollouts name the check that flagged them")
        p.shot(os.path.join(a.shots, "view-health.png"))

        # A lake whose newer sweep's files are gone: its numbers browse, its cards say why
        # no transcript is shown, the older sweep's transcripts are read.
        lake = os.path.join(work, "lake")
        for seed in ["1", "2"]:
            out = os.path.join(work, "lake-s" + seed)
            subprocess.run([a.rollstat, "generate", "-q", "--tasks", "30", "--repeats", "2", "--agents", "1",
                            "--task-seed", "3", "--seed", seed, "--out-dir", out], check=True, stdout=subprocess.DEVNULL)
            subprocess.run([a.rollstat, "-q", "export", os.path.join(out, "rollouts.jsonl"), "--lake", lake,
                            "--sweep-id", "s" + seed], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.remove(os.path.join(work, "lake-s2", "rollouts.jsonl"))
        lk = View(a.rollstat, ["--lake", lake])
        servers.append(lk)
        p.go(lk.url)
        p.ready()
        notes = p.js("document.querySelector('ul.notes') ? document.querySelector('ul.notes').innerText : ''")
        check("sweep s2 is served from the lake's tables" in notes, failures, "the overview says which sweep lost its files")
        p.go(lk.url + "#/task/0?a=" + str(next(r["id"] for r in json.loads(
            urllib.request.urlopen(lk.url + "api/task/0").read())["rollouts"] if r["run"] == "s2")))
        p.ready("/task/0")
        why = p.wait("document.querySelector('#cards .unavailable') && document.querySelector('#cards .unavailable').innerText",
                     "why the transcript is not shown")
        check(why.startswith("Not shown: ") and "missing" in why, failures, f"the card says why ({why[:80]!r})")
        check(p.js("document.querySelectorAll('#rollouts tr').length") == 5, failures, "both sweeps' rollouts are listed")
        p.shot(os.path.join(a.shots, "view-lake-gone.png"))

        # Bound to every address: 403 without the token, 200 with it.
        anyhost = View(a.rollstat, ["--host", "0.0.0.0", rollouts])
        servers.append(anyhost)
        port = urllib.parse.urlparse(anyhost.url).port
        token = urllib.parse.parse_qs(urllib.parse.urlparse(anyhost.url).query)["token"][0]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/overview")
            failures.append("a request without the token was answered")
        except urllib.error.HTTPError as e:
            check(e.code == 403, failures, f"without the token: {e.code}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/?token={token}") as r:
            check(r.status == 200, failures, "with the token: 200")
    finally:
        b.close()
        for s in servers:
            s.close()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        sys.exit(1)
    print("rollstat view works in Chromium: overview, filters, task, pair, deep link, growth, health, hostile text inert, a lake without its files, token")


if __name__ == "__main__":
    main()
