#!/usr/bin/env python3
"""Loads a rollstat report page in headless Chromium and checks it renders.

Talks the Chrome DevTools Protocol over --remote-debugging-pipe (file descriptors 3 and
4, NUL-terminated JSON messages), so it needs only the Python standard library.

Fails on any console error, uncaught exception or failed resource load; checks that
every section's chart has a non-zero size; takes a full-page screenshot 1280 px wide
and checks it is not blank (pixel variance). Writes the screenshot to --png, and with
--docs-png also the top --docs-height pixels of the page.

usage: check_report.py REPORT.html --png OUT.png [--docs-png DOCS.png --docs-height 1700]
                       [--sections trend,changes]  (the sections with a chart; default: the
                       sweep report's)
"""

import argparse
import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

SECTIONS = ["leaderboard", "baseline", "pass-at-k", "difficulty", "repeats", "cost"]
WIDTH = 1280


class Browser:
    def __init__(self, chromium, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # Out of the way first: either end may already sit at 3 or 4.
            r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank",
        ]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child_fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe (did it start?)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_event(self, method, timeout=60):
        deadline = time.time() + timeout
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read_message(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def png_pixels(data):
    """Width, height, channels and rows of an 8-bit RGB(A) PNG, unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    assert depth == 8 and ctype in (2, 6), f"unexpected PNG type {depth}/{ctype}"
    ch = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, ch, rows


def variance(data, step=7):
    """Variance of the grey level over a sample of the pixels."""
    w, h, ch, rows = png_pixels(data)
    vals = []
    for y in range(0, h, step):
        r = rows[y]
        for x in range(0, w, step):
            i = x * ch
            vals.append((r[i] + r[i + 1] + r[i + 2]) / 3)
    m = sum(vals) / len(vals)
    return sum((v - m) ** 2 for v in vals) / len(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--png", required=True)
    ap.add_argument("--docs-png")
    ap.add_argument("--docs-height", type=int, default=1700)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    a = ap.parse_args()
    profile = tempfile.mkdtemp(prefix="rollstat-chromium-")
    b = Browser(a.chromium, profile)
    failures = []
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for m in ["Page.enable", "Runtime.enable", "Log.enable", "Network.enable"]:
            b.call(m, session=s)
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=s)
        url = "file://" + os.path.abspath(a.report)
        nav = b.call("Page.navigate", {"url": url}, session=s)
        if nav.get("errorText"):
            failures.append(f"navigation failed: {nav['errorText']}")
        b.wait_event("Page.loadEventFired")
        # Let late console messages arrive.
        b.call("Runtime.evaluate", {"expression": "1"}, session=s)
        for e in b.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                failures.append(f"console error: {p.get('args')}")
            elif m == "Runtime.exceptionThrown":
                failures.append(f"uncaught exception: {p.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                failures.append(f"browser error: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.loadingFailed":
                failures.append(f"failed load: {p.get('errorText')} ({p.get('type')})")
            elif m == "Network.requestWillBeSent" and not p.get("request", {}).get("url", "").startswith(("file:", "data:", "about:")):
                failures.append(f"network request: {p['request']['url']}")
        js = """JSON.stringify(%s.map(id => {
            const s = document.getElementById(id);
            if (!s) return [id, null];
            const c = s.querySelector('svg.chart') || s.querySelector('p.note');
            const r = c ? c.getBoundingClientRect() : {width: 0, height: 0};
            return [id, [r.width, r.height, c ? c.tagName : null]];
        }))""" % json.dumps(a.sections.split(","))
        sizes = json.loads(b.call("Runtime.evaluate", {"expression": js, "returnByValue": True}, session=s)["result"]["value"])
        for sec, size in sizes:
            if size is None:
                failures.append(f"section {sec} missing")
            elif not (size[0] > 0 and size[1] > 0):
                failures.append(f"section {sec}: plot has size {size[0]}x{size[1]}")
            else:
                print(f"  {sec}: {size[2].lower()} {size[0]:.0f}x{size[1]:.0f}")
        height = b.call("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight", "returnByValue": True},
                        session=s)["result"]["value"]
        shot = b.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}}, session=s, timeout=120)
        png = base64.b64decode(shot["data"])
        os.makedirs(os.path.dirname(os.path.abspath(a.png)), exist_ok=True)
        with open(a.png, "wb") as f:
            f.write(png)
        v = variance(png)
        print(f"  screenshot {a.png}: {WIDTH}x{height} px, grey-level variance {v:.0f}")
        if v < 50:
            failures.append(f"screenshot looks blank (variance {v:.1f})")
        if a.docs_png:
            top = b.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH, "height": min(height, a.docs_height), "scale": 1}}, session=s)
            with open(a.docs_png, "wb") as f:
                f.write(base64.b64decode(top["data"]))
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f, file=sys.stderr)
        sys.exit(1)
    print("report renders in Chromium: no errors, every plot has a size, screenshot not blank")


if __name__ == "__main__":
    main()
