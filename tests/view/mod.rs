//! `rollstat view`: the server started as a user starts it, asked over HTTP on loopback.
//! Its counts are checked against a count made here from the rollout lines, its filters
//! against the same, and its bounds, growth, refusals and security headers directly.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};

use rollstat::json::{parse, Json};

use crate::common::{add_to_lake, fixtures, generate, rollstat, TempDir};

/// A running `rollstat view`, killed when dropped.
struct Server {
    child: Child,
    url: String,
    /// `host:port`.
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> Server {
    let mut child = rollstat().arg("view").args(["--port", "0"]).args(args).stdout_to(Stdio::piped()).spawn();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://"), "view printed {url:?}");
    let addr = url["http://".len()..].split('/').next().unwrap().to_string();
    Server { child, url, addr }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Json {
        parse(self.body.as_bytes()).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// One GET over a fresh connection, with the Host header `host` (the server's own by default).
fn get_with(addr: &str, path: &str, host: Option<&str>, extra: &[(&str, &str)]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", host.unwrap_or(addr));
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    Reply { status, headers, body: body.to_string() }
}

fn get(s: &Server, path: &str) -> Reply {
    get_with(&s.addr, path, None, &[])
}

fn ok_json(s: &Server, path: &str) -> Json {
    let r = get(s, path);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json()
}

fn int(v: &Json) -> i64 {
    match v {
        Json::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

fn float(v: &Json) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Per agent and task, the rewards of the measured rollouts, read from the lines here.
fn measured(path: &Path) -> BTreeMap<String, BTreeMap<i64, Vec<f64>>> {
    let mut out: BTreeMap<String, BTreeMap<i64, Vec<f64>>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines().filter(|l| !l.trim().is_empty()) {
        let v = parse(line.as_bytes()).unwrap();
        let agent = v.get("agent_ref").and_then(|a| a.get("name")).and_then(Json::as_str).unwrap().to_string();
        let task = int(v.get("_ng_task_index").unwrap());
        let entry = out.entry(agent).or_default().entry(task).or_default();
        if v.get("mask_sample") == Some(&Json::Bool(true)) {
            continue;
        }
        if let Some(r) = v.get("reward").and_then(Json::as_f64) {
            entry.push(r);
        }
    }
    out
}

fn slices(tasks: &BTreeMap<i64, Vec<f64>>) -> [BTreeSet<i64>; 3] {
    let mut s: [BTreeSet<i64>; 3] = Default::default();
    for (&t, r) in tasks {
        if r.is_empty() {
            continue;
        }
        let k = r.iter().filter(|&&x| x >= 0.5).count();
        s[if k == 0 {
            0
        } else if k == r.len() {
            2
        } else {
            1
        }]
        .insert(t);
    }
    s
}

fn mean(r: &[f64]) -> f64 {
    r.iter().sum::<f64>() / r.len() as f64
}

/// Every task index a filter returns, over all its pages.
fn all_tasks(s: &Server, filter: &str) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for page in 0.. {
        let v = ok_json(s, &format!("/api/tasks?{filter}&size=200&page={page}"));
        let rows = match v.get("rows") {
            Some(Json::Arr(r)) => r.clone(),
            _ => panic!("no rows"),
        };
        if rows.is_empty() {
            assert_eq!(int(v.get("total").unwrap()) as usize, out.len(), "{filter}: total");
            return out;
        }
        out.extend(rows.iter().map(|r| int(r.get("task").unwrap())));
    }
    unreachable!()
}

/// The tasks the SQL filter `expr` keeps (the table is built in the background: asked
/// until it is there).
fn sql_tasks(s: &Server, expr: &str) -> BTreeSet<i64> {
    for _ in 0..200 {
        let r = get(s, &format!("/api/tasks?size=1&sql={}", enc(expr)));
        if r.status == 200 {
            return all_tasks(s, &format!("sql={}", enc(expr)));
        }
        assert!(r.body.contains("still being built"), "{}", r.body);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the SQL table was never built")
}

fn sweep(d: &TempDir) -> std::path::PathBuf {
    generate(
        d.path(),
        &["--tasks", "60", "--repeats", "4", "--agents", "2", "--fan-out", "--seed", "11", "--masked-frac", "0.05"],
    );
    d.join("rollouts.jsonl")
}

#[test]
fn overview_and_slices_match_a_count_of_the_lines() {
    let d = TempDir::new("view-overview");
    let rollouts = sweep(&d);
    let s = serve(&[rollouts.to_str().unwrap()]);
    let o = ok_json(&s, "/api/overview");
    let want = measured(&rollouts);
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!("no runs") };
    assert_eq!(runs.len(), want.len());
    // The comparison's own numbers, for the means and intervals.
    let cmp = rollstat().args(["compare", "--format", "json"]).arg(&rollouts).ok();
    let cmp = parse(&cmp.stdout).unwrap();
    let Json::Arr(cmp_rows) = cmp else { panic!("compare json is not an array") };
    for run in runs {
        let name = run.get("name").and_then(Json::as_str).unwrap();
        let tasks = &want[name];
        let [never, sometimes, always] = slices(tasks);
        let sl = run.get("slices").unwrap();
        assert_eq!(int(sl.get("never").unwrap()) as usize, never.len(), "{name} never");
        assert_eq!(int(sl.get("sometimes").unwrap()) as usize, sometimes.len(), "{name} sometimes");
        assert_eq!(int(sl.get("always").unwrap()) as usize, always.len(), "{name} always");
        let c = cmp_rows.iter().find(|r| r.get("run").and_then(Json::as_str) == Some(name)).unwrap();
        assert_eq!(float(run.get("mean").unwrap()), float(c.get("mean").unwrap()), "{name} mean");
        assert_eq!(float(run.get("ci_low").unwrap()), float(c.get("ci_low_95").unwrap()), "{name} ci_low");
        assert_eq!(float(run.get("ci_high").unwrap()), float(c.get("ci_high_95").unwrap()), "{name} ci_high");
        // The bundled `task_slices` query lists the same tasks.
        let q = rollstat().args(["query", "task_slices", "--format", "json", "--rollouts"]).arg(&rollouts).ok();
        let Json::Arr(q) = parse(&q.stdout).unwrap() else { panic!("query json is not an array") };
        for (slice, want) in [("never", &never), ("sometimes", &sometimes), ("always", &always)] {
            let row = q.iter().find(|r| {
                r.get("agent").and_then(Json::as_str) == Some(name)
                    && r.get("slice").and_then(Json::as_str) == Some(slice)
            });
            let got: BTreeSet<i64> = row
                .and_then(|r| r.get("task_indexes").and_then(Json::as_str))
                .map(|t| t.split(',').map(|x| x.parse().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(&got, want, "task_slices {name} {slice}");
        }
        // Following a count gives exactly those tasks.
        assert_eq!(all_tasks(&s, &format!("run={}&slice=never", enc(name))), never, "{name} never list");
        assert_eq!(all_tasks(&s, &format!("run={}&slice=always", enc(name))), always, "{name} always list");
    }
}

#[test]
fn filters_sort_and_page_on_the_server() {
    let d = TempDir::new("view-filters");
    let rollouts = sweep(&d);
    let s = serve(&[rollouts.to_str().unwrap()]);
    let want = measured(&rollouts);
    let names: Vec<&String> = want.keys().collect();
    let (base, cand) = (&want[names[0]], &want[names[1]]);
    // Mean range.
    let in_band: BTreeSet<i64> =
        base.iter().filter(|(_, r)| !r.is_empty() && (0.25..=0.75).contains(&mean(r))).map(|(t, _)| *t).collect();
    assert_eq!(all_tasks(&s, "min=0.25&max=0.75"), in_band);
    // Flips against the baseline (the first run).
    let solved = |r: &Vec<f64>| mean(r) >= 0.5;
    let fixed: BTreeSet<i64> = base
        .iter()
        .filter(|(t, r)| !r.is_empty() && cand.get(t).is_some_and(|c| !c.is_empty() && !solved(r) && solved(c)))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(all_tasks(&s, &format!("run={}&flip=fail-pass", enc(names[1]))), fixed);
    // SQL over the tasks table (built in the background: asked until it is there).
    let mut sql = None;
    for _ in 0..100 {
        let r = get(&s, &format!("/api/tasks?size=200&sql={}", enc("\"mean/reward\" >= 0.5")));
        if r.status == 200 {
            sql = Some(r.json());
            break;
        }
        assert!(r.body.contains("still being built"), "{}", r.body);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let sql = sql.expect("the SQL table was never built");
    let any_solved = (0..200i64)
        .filter(|t| want.values().any(|tasks| tasks.get(t).is_some_and(|r| !r.is_empty() && solved(r))))
        .count();
    assert_eq!(int(sql.get("total").unwrap()) as usize, any_solved);
    // A bad expression is a message, not a crash; the server still answers.
    let bad = get(&s, &format!("/api/tasks?sql={}", enc("no_such_column > 1")));
    assert_eq!(bad.status, 400);
    assert!(bad.json().get("error").and_then(Json::as_str).unwrap().starts_with("sql:"), "{}", bad.body);
    let sub = get(&s, &format!("/api/tasks?sql={}", enc("1 IN (SELECT 1)")));
    assert_eq!(sub.status, 400, "{}", sub.body);
    // Text search, any case: every hit holds the word, and the task it came from is a hit.
    let first = ok_json(&s, "/api/task/0");
    let Some(Json::Arr(prompt)) = first.get("prompt") else { panic!("no prompt") };
    let user = prompt.iter().find(|m| m.get("role").and_then(Json::as_str) == Some("user")).unwrap();
    let word = user
        .get("text")
        .and_then(Json::as_str)
        .unwrap()
        .split_whitespace()
        .filter(|w| w.len() >= 4 && w.chars().all(|c| c.is_ascii_alphabetic()))
        .max_by_key(|w| w.len())
        .expect("an English word in task 0's prompt");
    let hits = all_tasks(&s, &format!("q={}", enc(&word.to_uppercase())));
    assert!(hits.contains(&0), "task 0 holds {word:?}");
    for t in &hits {
        let v = ok_json(&s, &format!("/api/task/{t}"));
        let mut b = Vec::new();
        rollstat::json::write_compact(&mut b, v.get("prompt").unwrap());
        assert!(String::from_utf8_lossy(&b).to_lowercase().contains(&word.to_lowercase()), "task {t}");
    }
    // Sorted by mean, descending; pages of 7 tile the list.
    let v = ok_json(&s, "/api/tasks?sort=mean&order=desc&size=7&page=1");
    let Some(Json::Arr(rows)) = v.get("rows") else { panic!() };
    assert_eq!(rows.len(), 7);
    let means: Vec<f64> = rows
        .iter()
        .map(|r| match r.get("runs") {
            Some(Json::Arr(a)) => float(a[0].get("mean").unwrap()),
            _ => panic!("no runs"),
        })
        .collect();
    assert!(means.windows(2).all(|w| w[0] >= w[1]), "{means:?}");
    // Malformed parameters are 400s that name the parameter.
    for (q, name) in [
        ("size=0", "size"),
        ("page=x", "page"),
        ("slice=maybe", "slice"),
        ("sort=color", "sort"),
        ("run=nobody", "run"),
        ("min=low", "min"),
        ("flip=up", "flip"),
    ] {
        let r = get(&s, &format!("/api/tasks?{q}"));
        assert_eq!(r.status, 400, "{q}");
        assert!(r.json().get("error").and_then(Json::as_str).unwrap().starts_with(name), "{q}: {}", r.body);
    }
    for p in ["/api/task/x", "/api/task/99999", "/api/rollout/-1", "/api/rollout/999999", "/api/rollout/0/text"] {
        assert_eq!(get(&s, p).status, 400, "{p}");
    }
}

#[test]
fn a_task_holds_every_rollout_with_its_line() {
    let d = TempDir::new("view-task");
    let rollouts = sweep(&d);
    let s = serve(&[rollouts.to_str().unwrap()]);
    let text = std::fs::read_to_string(&rollouts).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let t = ok_json(&s, "/api/task/3");
    let Some(Json::Arr(rs)) = t.get("rollouts") else { panic!() };
    let want = lines.iter().filter(|l| int(parse(l.as_bytes()).unwrap().get("_ng_task_index").unwrap()) == 3).count();
    assert_eq!(rs.len(), want);
    for r in rs {
        let id = int(r.get("id").unwrap());
        let line = int(r.get("line").unwrap()) as usize;
        let raw = ok_json(&s, &format!("/api/rollout/{id}/raw"));
        assert_eq!(raw.get("text").and_then(Json::as_str), Some(lines[line - 1]), "rollout {id}");
        let one = ok_json(&s, &format!("/api/rollout/{id}"));
        let src = parse(lines[line - 1].as_bytes()).unwrap();
        assert_eq!(one.get("rollout"), src.get("_ng_rollout_index"));
        let Some(Json::Arr(out)) = one.get("output") else { panic!("no output") };
        let Some(Json::Arr(src_out)) = src.get("response").and_then(|r| r.get("output")) else { panic!() };
        assert_eq!(out, src_out, "the transcript is the line's own");
    }
}

/// A rollout line with `items` output items and one string of `big` bytes.
fn hostile_line(task: i64, items: usize, big: usize) -> String {
    let mut out = Vec::new();
    out.push(format!(
        r#"{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"<script>alert(1)</script><img src=x onerror=alert(2)>{}"}}]}}"#,
        "x".repeat(big)
    ));
    for i in 1..items {
        out.push(format!(r#"{{"type":"function_call","name":"f{i}","arguments":"{{\"a\":{i}}}","call_id":"c{i}"}}"#));
    }
    format!(
        r#"{{"responses_create_params":{{"input":[{{"role":"user","content":"javascript:alert(3) \u202e evil"}}]}},"response":{{"output":[{}]}},"reward":1.0,"agent_ref":{{"name":"a<b>"}},"_ng_task_index":{task},"_ng_rollout_index":0}}"#,
        out.join(",")
    )
}

#[test]
fn long_strings_and_long_transcripts_come_in_pieces() {
    let d = TempDir::new("view-bounds");
    let f = d.write("r.jsonl", &format!("{}\n", hostile_line(0, 1000, 3 << 20)));
    let s = serve(&[f.to_str().unwrap()]);
    let r = get(&s, "/api/rollout/0");
    assert!(r.body.len() < 1 << 20, "one answer is bounded: {} bytes", r.body.len());
    let v = r.json();
    assert_eq!(int(v.get("output_total").unwrap()), 1000);
    let Some(Json::Arr(page)) = v.get("output") else { panic!() };
    assert_eq!(page.len(), 100);
    let ptr = "/response/output/0/content/0/text";
    let whole = int(v.get("cut").and_then(|c| c.get(ptr)).expect("the long string is marked cut"));
    let mut got = String::new();
    let mut from = 0;
    while (got.len() as i64) < whole {
        let p = ok_json(&s, &format!("/api/rollout/0/text?ptr={}&from={from}", enc(ptr)));
        got.push_str(p.get("text").and_then(Json::as_str).unwrap());
        from = int(p.get("to").unwrap());
    }
    assert_eq!(got.len() as i64, whole);
    assert!(got.ends_with(&"x".repeat(100)));
    let next = ok_json(&s, "/api/rollout/0?from=900");
    let Some(Json::Arr(last)) = next.get("output") else { panic!() };
    assert_eq!(last.len(), 100);
    assert_eq!(last[99].get("name").and_then(Json::as_str), Some("f999"));
}

#[test]
fn lines_added_to_a_served_file_show_after_a_reload() {
    let d = TempDir::new("view-grow");
    let rollouts = sweep(&d);
    let text = std::fs::read_to_string(&rollouts).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    let growing = d.join("growing.jsonl");
    // Half the lines and the start of the next one, as a writer leaves them mid-write.
    let cut = lines[half].len() / 2;
    std::fs::write(&growing, format!("{}\n{}", lines[..half].join("\n"), &lines[half][..cut])).unwrap();
    let s = serve(&[growing.to_str().unwrap()]);
    assert_eq!(int(ok_json(&s, "/api/overview").get("rollouts").unwrap()) as usize, half);
    let mut f = std::fs::OpenOptions::new().append(true).open(&growing).unwrap();
    write!(f, "{}\n{}\n", &lines[half][cut..], lines[half + 1..].join("\n")).unwrap();
    drop(f);
    let o = ok_json(&s, "/api/overview");
    assert_eq!(int(o.get("rollouts").unwrap()) as usize, lines.len());
    let want = measured(&rollouts);
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    for run in runs {
        let name = run.get("name").and_then(Json::as_str).unwrap();
        let [never, _, _] = slices(&want[name]);
        assert_eq!(int(run.get("slices").and_then(|x| x.get("never")).unwrap()) as usize, never.len(), "{name}");
    }
    // The added rows open like the others: the file's last line, from its task's page.
    let task = int(parse(lines.last().unwrap().as_bytes()).unwrap().get("_ng_task_index").unwrap());
    let t = ok_json(&s, &format!("/api/task/{task}"));
    let Some(Json::Arr(rs)) = t.get("rollouts") else { panic!() };
    let r =
        rs.iter().find(|r| int(r.get("line").unwrap()) as usize == lines.len()).expect("the last line is a rollout");
    let last = ok_json(&s, &format!("/api/rollout/{}/raw", int(r.get("id").unwrap())));
    assert_eq!(last.get("text").and_then(Json::as_str), Some(*lines.last().unwrap()));
}

#[test]
fn headers_host_check_and_token() {
    let d = TempDir::new("view-security");
    let rollouts = sweep(&d);
    let s = serve(&[rollouts.to_str().unwrap()]);
    let page = get(&s, "/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-security-policy").unwrap().contains("script-src 'self'"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    for asset in ["/app.js", "/app.css"] {
        assert_eq!(get(&s, asset).status, 200, "{asset}");
    }
    // A page elsewhere that rebinds a name to 127.0.0.1 sends its own Host.
    assert_eq!(get_with(&s.addr, "/api/overview", Some("evil.example:80"), &[]).status, 403);
    // Anything but loopback needs the token.
    let open = serve(&["--host", "0.0.0.0", rollouts.to_str().unwrap()]);
    let token = open.url.split("token=").nth(1).expect("the URL carries a token").to_string();
    assert!(token.len() >= 16);
    let port = open.addr.rsplit(':').next().unwrap();
    let local = format!("127.0.0.1:{port}");
    assert_eq!(get_with(&local, "/api/overview", None, &[]).status, 403);
    assert_eq!(get_with(&local, "/?token=wrong", None, &[]).status, 403);
    let first = get_with(&local, &format!("/?token={token}"), None, &[]);
    assert_eq!(first.status, 200);
    let cookie = first.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    assert_eq!(get_with(&local, "/api/overview", None, &[("Cookie", &cookie)]).status, 200);
    // Read only: nothing but GET.
    let mut c = TcpStream::connect(&s.addr).unwrap();
    write!(c, "POST /api/overview HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", s.addr)
        .unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
}

#[test]
fn a_malformed_line_is_refused_before_serving() {
    let d = TempDir::new("view-bad");
    let f =
        d.write("bad.jsonl", &format!("{}\n{{\"reward\": 1.0,\n{}\n", hostile_line(0, 1, 1), hostile_line(1, 1, 1)));
    let o = rollstat().args(["view", "--port", "0"]).arg(&f).fails(2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.jsonl") && err.contains("line 2"), "{err}");
    assert!(o.stdout.is_empty(), "no URL is printed");
}

/// The strings of a JSON array.
fn strings(v: Option<&Json>) -> BTreeSet<String> {
    match v {
        Some(Json::Arr(a)) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn health_verdicts_agree_with_the_health_reports() {
    // Rollouts whose trajectories trigger every rollout check, beside the verdicts NeMo
    // Gym's health check wrote for them.
    let case = fixtures().join("conformance/gym_aggregate/health/rollout_checks");
    let s = serve(&[case.join("rollouts.jsonl").to_str().unwrap()]);
    let expected = std::fs::read_to_string(case.join("expected/rollout_verdicts.jsonl")).unwrap();
    let mut verdicts: BTreeMap<&str, i64> = BTreeMap::new();
    let mut by_check: BTreeMap<String, (i64, BTreeSet<i64>)> = BTreeMap::new();
    for line in expected.lines() {
        let want = parse(line.as_bytes()).unwrap();
        let (task, rollout) = (int(want.get("_ng_task_index").unwrap()), int(want.get("_ng_rollout_index").unwrap()));
        let Some(Json::Arr(findings)) = want.get("findings") else { panic!() };
        let flagged: BTreeSet<String> =
            findings.iter().map(|f| f.get("check").unwrap().as_str().unwrap().to_string()).collect();
        let t = ok_json(&s, &format!("/api/task/{task}"));
        let Some(Json::Arr(rs)) = t.get("rollouts") else { panic!() };
        let got = rs.iter().find(|r| int(r.get("rollout").unwrap()) == rollout).expect("the rollout is served");
        let h = got.get("health").unwrap();
        let verdict = want.get("verdict").unwrap().as_str().unwrap();
        assert_eq!(h.get("verdict").unwrap().as_str(), Some(verdict), "task {task} repeat {rollout}");
        assert_eq!(strings(h.get("flagged")), flagged, "task {task} repeat {rollout}");
        assert_eq!(strings(h.get("unobserved")), strings(want.get("unobserved")), "task {task} repeat {rollout}");
        *verdicts
            .entry(["healthy", "unhealthy", "unobserved"].into_iter().find(|v| *v == verdict).unwrap())
            .or_default() += 1;
        for c in flagged {
            let e = by_check.entry(c).or_default();
            e.0 += 1;
            e.1.insert(task);
        }
    }
    // The overview counts the same, per verdict and per check; each check's count opens
    // exactly the tasks that hold a rollout it flagged.
    let o = ok_json(&s, "/api/overview");
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    let h = runs[0].get("health").unwrap();
    for v in ["healthy", "unhealthy", "unobserved"] {
        assert_eq!(int(h.get(v).unwrap()), verdicts.get(v).copied().unwrap_or(0), "{v}");
    }
    let Some(Json::Obj(checks)) = h.get("checks") else { panic!() };
    assert_eq!(checks.len(), 12, "every rollout check is listed");
    for (c, counts) in checks.iter() {
        let (n, tasks) = by_check.get(c.as_ref()).cloned().unwrap_or_default();
        assert_eq!(int(counts.get("rollouts").unwrap()), n, "{c}");
        assert_eq!(int(counts.get("tasks").unwrap()) as usize, tasks.len(), "{c}");
        assert_eq!(all_tasks(&s, &format!("check={c}")), tasks, "{c}");
    }
    assert!(by_check.len() >= 10, "the case flags most checks: {by_check:?}");
    let bad = get(&s, "/api/tasks?check=no_such_check");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("model_call_failed"), "{}", bad.body);
    drop(s);

    // Without the check, nothing claims a verdict.
    let s = serve(&[case.join("rollouts.jsonl").to_str().unwrap(), "--no-health-check"]);
    let o = ok_json(&s, "/api/overview");
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    assert_eq!(runs[0].get("health"), Some(&Json::Null));
    let Some(Json::Arr(rs)) = ok_json(&s, "/api/task/0").get("rollouts").cloned() else { panic!() };
    assert_eq!(rs[0].get("health"), Some(&Json::Null));
    assert_eq!(get(&s, "/api/tasks?check=model_call_failed").status, 400);
}

#[test]
fn a_lake_serves_its_sweeps_and_browses_one_whose_files_are_gone() {
    let d = TempDir::new("view-lake");
    let lake = d.join("lake");
    for (seed, step) in [("1", "100"), ("2", "200")] {
        let dir = d.join(&format!("s{seed}"));
        generate(&dir, &["--tasks", "40", "--repeats", "4", "--agents", "1", "--task-seed", "3", "--seed", seed]);
        add_to_lake(&dir, &lake, &["--label", &format!("step={step}")]);
    }
    // The flips as the bundled query finds them, by the sweep they flipped in.
    let q = rollstat().args(["query", "sweep_flips", "--format", "csv", "--lake"]).arg(&lake).ok();
    let csv = String::from_utf8(q.stdout).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (mut fixed, mut broken) = (BTreeSet::new(), BTreeSet::new());
    let mut sweep_ids = (String::new(), String::new());
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        sweep_ids = (f[col("from_sweep")].to_string(), f[col("to_sweep")].to_string());
        let task: i64 = f[col("to_task")].parse().unwrap();
        if f[col("flip")] == "fixed" {
            fixed.insert(task)
        } else {
            broken.insert(task)
        };
    }
    assert!(!fixed.is_empty() && !broken.is_empty(), "{csv}");

    let s = serve(&["--lake", lake.to_str().unwrap(), "--no-health-check"]);
    let o = ok_json(&s, "/api/overview");
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    let names: Vec<&str> = runs.iter().map(|r| r.get("name").unwrap().as_str().unwrap()).collect();
    assert_eq!(names, [sweep_ids.0.as_str(), sweep_ids.1.as_str()], "the older sweep is the baseline");
    let Some(Json::Arr(listed)) = o.get("lake").and_then(|l| l.get("sweeps")) else { panic!() };
    let labels: Vec<&str> =
        listed.iter().map(|s| s.get("labels").unwrap().get("step").unwrap().as_str().unwrap()).collect();
    assert_eq!(labels, ["100", "200"]);
    let run = &sweep_ids.1;
    assert_eq!(all_tasks(&s, &format!("run={run}&flip=fail-pass")), fixed);
    assert_eq!(all_tasks(&s, &format!("run={run}&flip=pass-fail")), broken);
    // A flipped task holds both sweeps' rollouts, each read from its sweep's file.
    let t = ok_json(&s, &format!("/api/task/{}", fixed.iter().next().unwrap()));
    let Some(Json::Arr(rs)) = t.get("rollouts") else { panic!() };
    let runs_seen: BTreeSet<&str> = rs.iter().map(|r| r.get("run").unwrap().as_str().unwrap()).collect();
    assert_eq!(runs_seen.len(), 2);
    let means = |o: &Json| -> Vec<f64> {
        let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
        runs.iter().map(|r| float(r.get("mean").unwrap())).collect()
    };
    let (means_then, solved_then) = (means(&o), sql_tasks(&s, "\"mean/reward\" >= 0.5"));
    assert!(!solved_then.is_empty());
    drop(s);

    // One sweep by id; an unknown one is refused naming the lake's sweeps.
    let one = serve(&["--lake", lake.to_str().unwrap(), "--sweep", &sweep_ids.1, "--no-health-check"]);
    let o = ok_json(&one, "/api/overview");
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    assert_eq!(runs.len(), 1);
    drop(one);
    let o = rollstat().args(["view", "--port", "0", "--lake"]).arg(&lake).args(["--sweep", "nope"]).fails(2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&sweep_ids.0) && err.contains(&sweep_ids.1), "{err}");

    // A source changed since the sweep was added: that sweep is served from the lake's
    // tables, its numbers, flips and SQL rows as before, and each of its rollouts says
    // why its transcript is not shown; the other sweep's transcripts are read as before.
    let changed = d.join("s2").join("rollouts.jsonl");
    let mut text = std::fs::read(&changed).unwrap();
    text.extend_from_slice(b"\n");
    std::fs::write(&changed, text).unwrap();
    let s = serve(&["--lake", lake.to_str().unwrap()]);
    let o = ok_json(&s, "/api/overview");
    let notes = format!("{:?}", o.get("notes").unwrap());
    assert!(notes.contains(&format!("sweep {} is served from the lake's tables", sweep_ids.1)), "{notes}");
    assert!(notes.contains("s2/rollouts.jsonl") && notes.contains("changed since the sweep was added"), "{notes}");
    assert_eq!(means(&o), means_then);
    let Some(Json::Arr(runs)) = o.get("runs") else { panic!() };
    assert!(runs[0].get("health").unwrap().get("healthy").is_some(), "the intact sweep is judged");
    assert_eq!(runs[1].get("health"), Some(&Json::Null), "the lines of the other are not at hand");
    assert_eq!(all_tasks(&s, &format!("run={run}&flip=fail-pass")), fixed);
    assert_eq!(all_tasks(&s, &format!("run={run}&flip=pass-fail")), broken);
    assert_eq!(sql_tasks(&s, "\"mean/reward\" >= 0.5"), solved_then);
    let t = ok_json(&s, &format!("/api/task/{}", fixed.iter().next().unwrap()));
    assert!(matches!(t.get("prompt"), Some(Json::Arr(p)) if !p.is_empty()), "the prompt from the intact sweep");
    let Some(Json::Arr(rs)) = t.get("rollouts") else { panic!() };
    for r in rs {
        let id = int(r.get("id").unwrap());
        let card = ok_json(&s, &format!("/api/rollout/{id}"));
        let why = card.get("unavailable").unwrap();
        if r.get("run").unwrap().as_str() == Some(run.as_str()) {
            let why = why.as_str().unwrap();
            assert!(why.contains("s2/rollouts.jsonl") && why.contains("changed"), "{why}");
            assert!(card.get("fields").unwrap().get("num_steps").is_some(), "the lake's fields: {card:?}");
            let raw = get(&s, &format!("/api/rollout/{id}/raw"));
            assert_eq!(raw.status, 400);
            assert!(raw.body.contains("not shown"), "{}", raw.body);
        } else {
            assert_eq!(why, &Json::Null);
            assert!(int(card.get("output_total").unwrap()) > 0, "{card:?}");
        }
    }
    drop(s);

    // Both sweeps' files gone: every number still browses, tasks paired by the
    // fingerprints the lake recorded; no prompt, and the page says why.
    std::fs::rename(d.join("s1").join("rollouts.jsonl"), d.join("s1").join("moved.jsonl")).unwrap();
    let s = serve(&["--lake", lake.to_str().unwrap()]);
    assert_eq!(means(&ok_json(&s, "/api/overview")), means_then);
    assert_eq!(all_tasks(&s, &format!("run={run}&flip=fail-pass")), fixed);
    let t = ok_json(&s, &format!("/api/task/{}", fixed.iter().next().unwrap()));
    assert_eq!(t.get("prompt"), Some(&Json::Arr(Vec::new())));
    let why = t.get("prompt_unavailable").and_then(Json::as_str).unwrap();
    assert!(why.contains("s1/rollouts.jsonl: missing"), "{why}");
}
