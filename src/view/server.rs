//! The viewer's HTTP server: axum on a tokio runtime of its own. It serves the page
//! (plain HTML, JS and CSS built into the binary) and a read-only JSON API answered from
//! the index. Every response carries a Content-Security-Policy that allows only the
//! page's own scripts and styles, and `nosniff`. Bound to a loopback address it checks
//! the Host header (a page elsewhere cannot rebind a name to it); bound elsewhere every
//! request needs the token printed in the URL (kept in a cookie after the first).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use polars::prelude::*;

use super::answer::{self, Answer, BadRequest, SqlKeep, TaskQuery};
use super::index::{Index, ViewRuns};
use crate::error::{Error, Result};
use crate::ingest::RolloutTable;
use crate::json::Json;

const PAGE: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'";

/// The cookie that keeps the token after the first request.
const COOKIE: &str = "rollstat_view_token";

/// Where to serve and what.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    pub runs: ViewRuns,
    pub host: IpAddr,
    /// `None`: the first free port from [`DEFAULT_PORT`].
    pub port: Option<u16>,
}

/// The port tried first when none is given (and the next 20 after it).
pub const DEFAULT_PORT: u16 = 8765;

/// The `tasks` table the SQL filter runs over, built after the server starts.
enum SqlTable {
    Building,
    Ready(DataFrame),
    Failed(String),
}

/// What every request shares.
pub struct Served {
    index: RwLock<Index>,
    sql: Mutex<SqlTable>,
    /// The last SQL filter's answer, by expression.
    sql_cache: Mutex<Option<(String, SqlKeep)>>,
    /// Counts the table's builds: only the newest one's answer is kept.
    sql_generation: AtomicU64,
    /// Answers given so far (every [`RELEASE_EVERY`] the mapped pages are dropped).
    answered: AtomicU64,
    agent: Option<String>,
    token: Option<String>,
    /// Host header values accepted (loopback binds only; empty: any).
    hosts: Vec<String>,
}

/// A running viewer: its URL, and a way to stop it.
pub struct Running {
    pub url: String,
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stops the server and waits for it.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the runs, binds, and serves on a thread of its own; returns once the URL is known.
pub fn start(c: &ViewConfig) -> Result<Running> {
    let (index, tables) = Index::build(&c.runs)?;
    let loopback = c.host.is_loopback();
    let token = (!loopback).then(new_token).transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::write(std::path::Path::new("the viewer's runtime"), e))?;
    let listener = runtime.block_on(bind(c.host, c.port))?;
    let addr = listener.local_addr().map_err(|e| Error::write(std::path::Path::new("the viewer's socket"), e))?;
    let shown = match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
    };
    let hosts = if loopback {
        let p = addr.port();
        vec![format!("127.0.0.1:{p}"), format!("localhost:{p}"), format!("[::1]:{p}"), shown.clone()]
    } else {
        Vec::new()
    };
    let url = match &token {
        Some(t) => format!("http://{shown}/?token={t}"),
        None => format!("http://{shown}/"),
    };
    let served = Arc::new(Served {
        index: RwLock::new(index),
        sql: Mutex::new(SqlTable::Building),
        sql_cache: Mutex::new(None),
        sql_generation: AtomicU64::new(0),
        answered: AtomicU64::new(0),
        agent: c.runs.agent.clone(),
        token,
        hosts,
    });
    build_sql_table(served.clone(), Some(tables));
    let app = router(served);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("rollstat-view".into())
        .spawn(move || {
            runtime.block_on(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })
        .map_err(|e| Error::write(std::path::Path::new("the viewer's thread"), e))?;
    Ok(Running { url, addr, stop: Some(stop), thread: Some(thread) })
}

async fn bind(host: IpAddr, port: Option<u16>) -> Result<tokio::net::TcpListener> {
    let ports: Vec<u16> = match port {
        Some(p) => vec![p],
        None => (DEFAULT_PORT..DEFAULT_PORT + 21).collect(),
    };
    let mut last = None;
    for p in ports {
        match tokio::net::TcpListener::bind(SocketAddr::new(host, p)).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some((p, e)),
        }
    }
    let (p, e) = last.expect("at least one port is tried");
    Err(Error::Usage(format!(
        "cannot listen on {host} port {p}: {e} (give another --port, or --port 0 for any free one)"
    )))
}

/// A random token of 32 hex digits.
fn new_token() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::write(std::path::Path::new("/dev/urandom"), e))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Builds the SQL filter's `tasks` table on a thread of its own (the table the export
/// writes, with each row's run name as `run`): from `tables` when given, else from the
/// files read again (after they grew). A newer build replaces an older one's answer.
fn build_sql_table(served: Arc<Served>, tables: Option<Vec<Option<RolloutTable>>>) {
    let generation = served.sql_generation.fetch_add(1, Ordering::SeqCst) + 1;
    *served.sql.lock().unwrap_or_else(|e| e.into_inner()) = SqlTable::Building;
    *served.sql_cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
    std::thread::spawn(move || {
        let built = match tables {
            Some(t) => sql_table(&served, &t),
            None => reread(&served).and_then(|t| sql_table(&served, &t)),
        };
        // What building the table freed goes back to the system: serving keeps the index
        // and this table only.
        crate::ingest::release_free_memory();
        if served.sql_generation.load(Ordering::SeqCst) == generation {
            *served.sql.lock().unwrap_or_else(|e| e.into_inner()) = match built {
                Ok(df) => SqlTable::Ready(df),
                Err(e) => SqlTable::Failed(e.to_string()),
            };
        }
    });
}

/// Every file's rollouts read again, as far as the index reaches (`None` for a lake
/// sweep served from its tables).
fn reread(served: &Served) -> Result<Vec<Option<RolloutTable>>> {
    let files: Vec<(std::path::PathBuf, u64, bool, bool)> =
        served.index().files.iter().map(|f| (f.path.clone(), f.indexed, f.plain, f.gone.is_some())).collect();
    let opts = crate::ingest::rollouts::ReadOptions::FINGERPRINTS;
    files
        .iter()
        .map(|(path, end, plain, gone)| match (gone, plain) {
            (true, _) => Ok(None),
            (false, true) => crate::ingest::rollouts::read_rollouts_range(path, (0, *end), opts).map(Some),
            (false, false) => crate::ingest::read_rollouts(path, opts).map(Some),
        })
        .collect()
}

fn sql_table(served: &Served, tables: &[Option<RolloutTable>]) -> Result<DataFrame> {
    let (files, origin, names): (Vec<_>, Vec<_>, Vec<_>) = {
        let ix = served.index.read().unwrap_or_else(|e| e.into_inner());
        let files: Vec<_> = ix
            .files
            .iter()
            .map(|f| (f.inputs.clone(), f.failed.clone(), f.gone.as_ref().map(|g| g.tasks.clone())))
            .collect();
        (files, ix.origin.clone(), ix.runs.clone())
    };
    let mut frames: Vec<DataFrame> = Vec::new();
    for (f, t) in tables.iter().enumerate() {
        let (inputs, failed, lake_tasks) = &files[f];
        let mut df = match t {
            Some(t) => crate::metrics::tables::levels(t, inputs.as_deref(), served.agent.as_deref(), failed)?.0 .0,
            // A lake sweep served from its tables: the tasks table the lake holds.
            None => crate::ingest::parquet::read_parquet(
                lake_tasks.as_ref().expect("a run file read from no lines is a lake sweep's, with its tasks table"),
            )?,
        };
        let labels = df.column(crate::schema::AGENT)?.cast(&DataType::String)?;
        let run: StringChunked = labels
            .str()?
            .iter()
            .map(|l| {
                let l = l?;
                origin.iter().position(|(file, label)| *file == f && label == l).map(|r| names[r].clone())
            })
            .collect();
        df.with_column(run.with_name("run".into()).into_column())?;
        frames.push(df);
    }
    // One frame per run file, and a viewer serves at least one.
    let mut all = frames.remove(0);
    for df in frames {
        all = all.vstack(&aligned(&df, &all)?)?;
    }
    Ok(all)
}

/// `df` with `like`'s columns in `like`'s order (missing ones null, extra ones left out).
fn aligned(df: &DataFrame, like: &DataFrame) -> Result<DataFrame> {
    let cols: Vec<Column> = like
        .columns()
        .iter()
        .map(|c| match df.column(c.name()) {
            Ok(x) => x.cast(c.dtype()).map_err(Error::from),
            Err(_) => Ok(Column::full_null(c.name().clone(), df.height(), c.dtype())),
        })
        .collect::<Result<_>>()?;
    Ok(DataFrame::new(df.height(), cols)?)
}

fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/", get(|| async { asset(PAGE, "text/html; charset=utf-8") }))
        .route("/app.js", get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/app.css", get(|| async { asset(STYLE, "text/css; charset=utf-8") }))
        .route("/api/overview", get(api_overview))
        .route("/api/tasks", get(api_tasks))
        .route("/api/task/{index}", get(api_task))
        .route("/api/rollout/{id}", get(api_rollout))
        .route("/api/rollout/{id}/text", get(api_text))
        .route("/api/rollout/{id}/raw", get(api_raw))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such page") })
        .layer(middleware::from_fn_with_state(served.clone(), guard))
        .with_state(served)
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

fn json(v: &Json, status: StatusCode) -> Response {
    let mut out = Vec::new();
    crate::json::write_compact(&mut out, v);
    let mut r = Response::new(Body::from(out));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error(status: StatusCode, msg: &str) -> Response {
    let mut v = Json::obj();
    v.set("error", Json::Str(msg.to_string()));
    json(&v, status)
}

/// The token check, the Host check and the headers every response carries.
async fn guard(State(s): State<Arc<Served>>, req: Request, next: Next) -> Response {
    if !s.hosts.is_empty() {
        let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !s.hosts.iter().any(|h| h == host) {
            return secured(error(StatusCode::FORBIDDEN, "this server answers requests to its own address only"));
        }
    }
    let mut set_cookie = None;
    if let Some(token) = &s.token {
        let given =
            req.uri().query().and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")).map(str::to_string));
        let cookie = req.headers().get_all(header::COOKIE).iter().filter_map(|h| h.to_str().ok()).find_map(|h| {
            h.split(';').map(str::trim).find_map(|kv| kv.strip_prefix(COOKIE).and_then(|v| v.strip_prefix('=')))
        });
        let ok = |t: Option<&str>| t.is_some_and(|t| same(t.as_bytes(), token.as_bytes()));
        if ok(given.as_deref()) {
            set_cookie = Some(format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"));
        } else if !ok(cookie) {
            return secured(error(
                StatusCode::FORBIDDEN,
                "this viewer needs its token: open the URL `rollstat view` printed (it ends in ?token=…)",
            ));
        }
    }
    let mut r = next.run(req).await;
    if let Some(c) = set_cookie {
        if let Ok(v) = HeaderValue::from_str(&c) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    secured(r)
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    r
}

type Params = Query<HashMap<String, String>>;

/// Answers between two drops of the files' pages from the process.
const RELEASE_EVERY: u64 = 256;

/// Runs `f` off the async workers and turns its answer into a response.
async fn answer_with<F>(s: Arc<Served>, f: F) -> Response
where
    F: FnOnce(&Arc<Served>) -> Answer<Json> + Send + 'static,
{
    let answer = move || {
        let a = f(&s);
        // The pages of the files that answers read (transcripts, raw lines) are dropped
        // from the process now and then, so that serving keeps holding offsets, not text.
        if s.answered.fetch_add(1, Ordering::Relaxed) % RELEASE_EVERY == RELEASE_EVERY - 1 {
            s.index().files.iter().for_each(|f| f.release());
        }
        a
    };
    match tokio::task::spawn_blocking(answer).await {
        Ok(Ok(v)) => json(&v, StatusCode::OK),
        Ok(Err(BadRequest(msg))) => error(StatusCode::BAD_REQUEST, &msg),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "rollstat failed on this request"),
    }
}

impl Served {
    /// Indexes what growing files added since the last look (and then builds the SQL
    /// table again).
    fn grow(self: &Arc<Served>) -> bool {
        let changed = {
            let ix = self.index.read().unwrap_or_else(|e| e.into_inner());
            ix.files.iter().any(|f| f.plain && std::fs::metadata(&f.path).is_ok_and(|m| m.len() > f.indexed))
        };
        if !changed {
            return false;
        }
        let added = self.index.write().unwrap_or_else(|e| e.into_inner()).grow(self.agent.as_deref());
        if added {
            build_sql_table(self.clone(), None);
        }
        added
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The (run, task) pairs a SQL expression keeps, computed once per expression.
    fn sql_keep(&self, expr: &str) -> Answer<SqlKeep> {
        if let Some((e, keep)) = &*self.sql_cache.lock().unwrap_or_else(|e| e.into_inner()) {
            if e == expr {
                return Ok(keep.clone());
            }
        }
        let keep = {
            let table = self.sql.lock().unwrap_or_else(|e| e.into_inner());
            match &*table {
                SqlTable::Building => {
                    return Err(BadRequest("sql: the tasks table is still being built; try again in a moment".into()))
                }
                SqlTable::Failed(e) => return Err(BadRequest(format!("sql: the tasks table could not be built: {e}"))),
                SqlTable::Ready(df) => Arc::new(answer::sql_filter(df, expr)?),
            }
        };
        *self.sql_cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((expr.to_string(), keep.clone()));
        Ok(keep)
    }
}

async fn api_overview(State(s): State<Arc<Served>>) -> Response {
    answer_with(s, |s| {
        s.grow();
        Ok(answer::overview(&s.index()))
    })
    .await
}

fn parse<T: std::str::FromStr>(p: &HashMap<String, String>, name: &str, what: &str) -> Answer<Option<T>> {
    match p.get(name).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| BadRequest(format!("{name}: {v:?} is not {what}"))),
    }
}

async fn api_tasks(State(s): State<Arc<Served>>, Query(p): Params) -> Response {
    answer_with(s, move |s| {
        let text = |k: &str| p.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let sql = match text("sql") {
            None => None,
            Some(expr) => Some(s.sql_keep(&expr)?),
        };
        let q = TaskQuery {
            run: text("run"),
            slice: text("slice"),
            min: parse(&p, "min", "a number")?,
            max: parse(&p, "max", "a number")?,
            failure: text("failure"),
            check: text("check"),
            flip: text("flip"),
            text: p.get("q").cloned(),
            sql,
            sort: text("sort"),
            desc: match text("order").as_deref() {
                None | Some("asc") => false,
                Some("desc") => true,
                Some(o) => return Err(BadRequest(format!("order: {o:?} is not asc or desc"))),
            },
            page: parse(&p, "page", "a page number (0, 1, …)")?.unwrap_or(0),
            size: parse(&p, "size", "a number of tasks")?.unwrap_or(50),
        };
        s.grow();
        answer::tasks(&s.index(), &q)
    })
    .await
}

fn id_of<T: std::str::FromStr>(v: &str, what: &str) -> Answer<T> {
    v.parse().map_err(|_| BadRequest(format!("{what}: {v:?} is not a {what} id")))
}

async fn api_task(State(s): State<Arc<Served>>, UrlPath(index): UrlPath<String>) -> Response {
    answer_with(s, move |s| answer::task(&s.index(), id_of(&index, "task")?)).await
}

async fn api_rollout(State(s): State<Arc<Served>>, UrlPath(id): UrlPath<String>, Query(p): Params) -> Response {
    answer_with(s, move |s| {
        let from = parse(&p, "from", "an item number")?.unwrap_or(0);
        answer::rollout(&s.index(), id_of(&id, "rollout")?, from)
    })
    .await
}

async fn api_text(State(s): State<Arc<Served>>, UrlPath(id): UrlPath<String>, Query(p): Params) -> Response {
    answer_with(s, move |s| {
        let from = parse(&p, "from", "a byte offset")?.unwrap_or(0);
        let ptr = p.get("ptr").ok_or_else(|| BadRequest("ptr: give the JSON pointer of a string".into()))?;
        answer::string_piece(&s.index(), id_of(&id, "rollout")?, ptr, from)
    })
    .await
}

async fn api_raw(State(s): State<Arc<Served>>, UrlPath(id): UrlPath<String>, Query(p): Params) -> Response {
    answer_with(s, move |s| {
        let from = parse(&p, "from", "a byte offset")?.unwrap_or(0);
        answer::raw(&s.index(), id_of(&id, "rollout")?, from)
    })
    .await
}
