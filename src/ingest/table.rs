//! The columnar rollout table: one row per rollout line, one typed column per scalar
//! field. Each piece of the file records its values row by row; the pieces' records are
//! then scattered into the columns in the table's (task, rollout, line) order.

use std::collections::HashMap;

use rayon::prelude::*;

/// Value kinds, one byte per (row, column).
pub mod tag {
    pub const ABSENT: u8 = 0;
    pub const NULL: u8 = 1;
    pub const INT: u8 = 2;
    pub const FLOAT: u8 = 3;
    pub const BOOL: u8 = 4;
    pub const STR: u8 = 5;
    /// A string longer than the kept limit: known to be a string, text not kept.
    pub const LONG_STR: u8 = 6;

    /// Whether the tag carries a number (bools count as 0/1).
    #[inline]
    pub fn is_numeric(t: u8) -> bool {
        matches!(t, INT | FLOAT | BOOL)
    }
}

/// Strings longer than this are not kept (they are model text, not labels).
pub const MAX_KEPT_STR: usize = 512;

/// Where a field lives in a rollout line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A top-level key of the rollout.
    Top,
    /// A key of `response.usage`.
    Usage,
    /// A key of `ng_perf`.
    Perf,
}

/// One scalar field's values for every row.
#[derive(Debug, Clone)]
pub struct Column {
    pub source: Source,
    pub name: String,
    /// One [`tag`] per row.
    pub tags: Vec<u8>,
    /// The number for numeric tags: floats as they are, bools as 0/1, and ints as their
    /// exact i64 bit pattern (read them with [`Column::int`] / [`Column::float`]).
    pub nums: Vec<f64>,
    /// Index into `dict` for `STR` rows (`u32::MAX` elsewhere); empty when the column
    /// never held a kept string.
    pub codes: Vec<u32>,
    pub dict: Vec<String>,
}

impl Column {
    pub fn new(source: Source, name: String) -> Self {
        Column { source, name, tags: Vec::new(), nums: Vec::new(), codes: Vec::new(), dict: Vec::new() }
    }

    /// Numeric value at `row`, `None` when absent or not a number. NaN stays NaN.
    #[inline]
    pub fn num(&self, row: usize) -> Option<f64> {
        if tag::is_numeric(self.tags[row]) {
            Some(self.float(row))
        } else {
            None
        }
    }

    /// The value at a numeric `row` as f64 (ints are stored exactly, see [`Column::nums`]).
    #[inline]
    pub fn float(&self, row: usize) -> f64 {
        if self.tags[row] == tag::INT {
            self.int(row) as f64
        } else {
            self.nums[row]
        }
    }

    /// The exact integer at an `INT` row (bools as 0/1).
    #[inline]
    pub fn int(&self, row: usize) -> i64 {
        match self.tags[row] {
            tag::INT => self.nums[row].to_bits() as i64,
            _ => self.nums[row] as i64,
        }
    }

    /// Kept string at `row`.
    #[inline]
    pub fn str_at(&self, row: usize) -> Option<&str> {
        if self.tags[row] == tag::STR && !self.codes.is_empty() {
            let c = self.codes[row];
            if c != u32::MAX {
                return Some(&self.dict[c as usize]);
            }
        }
        None
    }

    pub fn has_numbers(&self) -> bool {
        self.tags.iter().any(|&t| tag::is_numeric(t))
    }
    pub fn has_strings(&self) -> bool {
        self.tags.iter().any(|&t| t == tag::STR || t == tag::LONG_STR)
    }
}

/// One value set while parsing: its column (piece-local id), tag, and payload (the
/// number's bits, or the dictionary code of a kept string). Twelve bytes: the column id
/// and tag share one word, and the payload is read unaligned (a million rollouts set
/// some twenty million values, all held until the pieces merge).
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
pub struct Rec {
    pub bits: u64,
    /// Column id in the low 24 bits, tag in the high 8.
    key: u32,
}

/// Column ids a record can hold (far more than rows could ever be stored for).
const MAX_COLS: usize = 1 << 24;

impl Rec {
    #[inline(always)]
    fn new(bits: u64, col: u32, tag: u8) -> Rec {
        debug_assert!((col as usize) < MAX_COLS);
        Rec { bits, key: col | (u32::from(tag) << 24) }
    }
    #[inline(always)]
    pub fn col(self) -> u32 {
        self.key & (MAX_COLS as u32 - 1)
    }
    #[inline(always)]
    pub fn tag(self) -> u8 {
        (self.key >> 24) as u8
    }
}

/// A piece's values, row-major: each row's records in the order they were set, so a row
/// is one contiguous run and setting a value is one append (no per-column padding).
/// Columns are built once, by [`merge_columns`], already in the table's row order.
#[derive(Default)]
pub struct ColumnsBuilder {
    /// Each column's source, name and dictionary (its `tags`/`nums`/`codes` stay empty).
    pub cols: Vec<Column>,
    index: [HashMap<Box<[u8]>, u32, foldhash::fast::RandomState>; 3],
    dicts: Vec<HashMap<String, u32, foldhash::fast::RandomState>>,
    /// Whether each column ever held a kept string (it then gets `codes`).
    stringy: Vec<bool>,
    recs: Vec<Rec>,
    /// End of each finished row's records in `recs`.
    row_end: Vec<u32>,
    /// Columns that existed when the current row began, and the columns whose first
    /// kept string is in the current row: what [`ColumnsBuilder::undo_row`] takes back.
    row_cols: usize,
    row_stringy: Vec<u32>,
    /// Lookups whose guess was wrong or missing (what the guesses are judged by).
    pub guess_misses: u64,
}

impl ColumnsBuilder {
    /// Column id for a key (raw bytes of an unescaped key or a decoded escaped one).
    #[inline]
    pub fn id(&mut self, source: Source, key: &[u8]) -> u32 {
        if let Some(&i) = self.index[source as usize].get(key) {
            return i;
        }
        assert!(self.cols.len() < MAX_COLS, "more than {MAX_COLS} distinct fields in one piece");
        let i = self.cols.len() as u32;
        self.cols.push(Column::new(source, String::from_utf8_lossy(key).into_owned()));
        self.dicts.push(HashMap::default());
        self.stringy.push(false);
        self.index[source as usize].insert(key.into(), i);
        i
    }

    /// Predicted lookup: if column `guess` has this source and name, use it. A guess may
    /// name a column an undone row removed; it then misses like any other.
    #[inline]
    pub fn id_guess(&mut self, source: Source, key: &[u8], guess: Option<u32>) -> u32 {
        if let Some(g) = guess {
            if self.is(g, source, key) {
                return g;
            }
        }
        self.guess_misses += 1;
        self.id(source, key)
    }

    /// The column for a key, if this piece has one (nothing is created).
    #[inline]
    pub fn find(&self, source: Source, key: &[u8]) -> Option<u32> {
        self.index[source as usize].get(key).copied()
    }

    /// Whether column `id` has this source and name.
    #[inline]
    pub fn is(&self, id: u32, source: Source, key: &[u8]) -> bool {
        self.cols
            .get(id as usize)
            .is_some_and(|c| c.source == source && crate::json::scan::bytes_eq(c.name.as_bytes(), key))
    }

    /// Sets a numeric/null value (`t` one of NULL, INT, FLOAT, BOOL, LONG_STR; or ABSENT,
    /// which takes back an earlier value) in the current row. Setting a column twice in a
    /// row keeps the last value (as in Python).
    #[inline]
    pub fn set(&mut self, id: u32, t: u8, v: f64) {
        self.recs.push(Rec::new(v.to_bits(), id, t));
    }

    /// Sets a kept string in the current row.
    pub fn set_str(&mut self, id: u32, s: &str) {
        let dict = &mut self.dicts[id as usize];
        let c = &mut self.cols[id as usize];
        let code = match dict.get(s) {
            Some(&k) => k,
            None => {
                let k = c.dict.len() as u32;
                c.dict.push(s.to_string());
                dict.insert(s.to_string(), k);
                k
            }
        };
        if !self.stringy[id as usize] {
            self.stringy[id as usize] = true;
            self.row_stringy.push(id);
        }
        self.recs.push(Rec::new(u64::from(code), id, tag::STR));
    }

    /// Room for `more` rows like the ones so far.
    pub fn reserve(&mut self, more: usize) {
        let per_row = self.recs.len().div_ceil(self.row_end.len().max(1));
        self.recs.reserve(more * per_row + per_row);
        self.row_end.reserve(more);
    }

    /// Ends the current row.
    #[inline]
    pub fn end_row(&mut self) {
        self.row_end.push(self.recs.len() as u32);
        self.row_cols = self.cols.len();
        self.row_stringy.clear();
    }

    /// Drops what was set in the current (unfinished) row, and the columns it alone
    /// introduced or first gave a string, so a cut-off last line leaves no trace.
    pub fn undo_row(&mut self) {
        self.recs.truncate(self.row_end.last().map_or(0, |&e| e as usize));
        for id in self.row_stringy.drain(..) {
            if let Some(s) = self.stringy.get_mut(id as usize) {
                *s = false;
            }
        }
        for c in self.cols.drain(self.row_cols..) {
            self.index[c.source as usize].remove(c.name.as_bytes());
        }
        self.dicts.truncate(self.row_cols);
        self.stringy.truncate(self.row_cols);
    }

    /// Rows finished so far.
    pub fn rows(&self) -> usize {
        self.row_end.len()
    }

    /// Hints the cache to load where row `r`'s records start and end.
    #[inline]
    fn prefetch_row_end(&self, r: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            if let Some(end) = self.row_end.get(r.saturating_sub(1)) {
                // SAFETY: a prefetch has no memory effect; the address is an element's.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(end as *const u32 as *const i8) };
            }
        }
    }

    /// Hints the cache to load row `r`'s records (up to four cache lines).
    #[inline]
    fn prefetch_row(&self, r: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let recs = self.row(r);
            let p = recs.as_ptr() as *const i8;
            for off in (0..std::mem::size_of_val(recs).min(256)).step_by(64) {
                // SAFETY: a prefetch has no memory effect; the address is inside the row.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
            }
        }
    }

    /// The records of finished row `r`.
    #[inline]
    fn row(&self, r: usize) -> &[Rec] {
        let start = if r == 0 { 0 } else { self.row_end[r - 1] as usize };
        &self.recs[start..self.row_end[r] as usize]
    }
}

/// How many rows ahead [`merge_columns`] prefetches.
const PREFETCH_AHEAD: usize = 8;

/// Merges the pieces' records into columns by (source, name), in order of first
/// appearance, whose row `i` is piece row `src[i]` (`(piece, row in piece)`):
/// concatenation and reordering in one pass. Rows are scattered in parallel over
/// blocks of output rows, each row's records read in one run. Returns the merged
/// columns and, per piece, the map from local to merged column ids.
pub fn merge_columns(mut pieces: Vec<ColumnsBuilder>, src: &[(u32, u32)]) -> (Vec<Column>, Vec<Vec<u32>>) {
    let mut order: Vec<(Source, String)> = Vec::new();
    let mut index: HashMap<(Source, String), u32> = HashMap::new();
    let mut maps = Vec::with_capacity(pieces.len());
    for b in &pieces {
        let mut m = Vec::with_capacity(b.cols.len());
        for c in &b.cols {
            let k = (c.source, c.name.clone());
            let id = *index.entry(k.clone()).or_insert_with(|| {
                order.push(k);
                (order.len() - 1) as u32
            });
            m.push(id);
        }
        maps.push(m);
    }
    let n = src.len();
    assert!(order.len() < MAX_COLS, "more than {MAX_COLS} distinct fields");
    let mut out: Vec<Column> = order.into_iter().map(|(source, name)| Column::new(source, name)).collect();
    // Merged dictionaries, in piece order, and each piece column's code remap.
    let mut remaps: Vec<Vec<Vec<u32>>> = Vec::with_capacity(pieces.len());
    {
        let mut dict_index: Vec<HashMap<String, u32>> = (0..out.len()).map(|_| HashMap::new()).collect();
        for (b, m) in pieces.iter().zip(&maps) {
            let per_col = b
                .cols
                .iter()
                .zip(m)
                .map(|(c, &g)| {
                    let (o, di) = (&mut out[g as usize], &mut dict_index[g as usize]);
                    c.dict
                        .iter()
                        .map(|s| {
                            *di.entry(s.clone()).or_insert_with(|| {
                                o.dict.push(s.clone());
                                (o.dict.len() - 1) as u32
                            })
                        })
                        .collect()
                })
                .collect();
            remaps.push(per_col);
        }
    }
    let mut has_codes = vec![false; out.len()];
    for (b, m) in pieces.iter().zip(&maps) {
        for (c, &g) in m.iter().enumerate() {
            has_codes[g as usize] |= b.stringy[c];
        }
    }
    for (o, &codes) in out.iter_mut().zip(&has_codes) {
        o.tags = vec![tag::ABSENT; n];
        o.nums = vec![0.0; n];
        if codes {
            o.codes = vec![u32::MAX; n];
        }
    }
    // Records switch to merged column ids and merged string codes in place (a sequential
    // pass), so the scatter below does no lookups.
    pieces.par_iter_mut().zip(&maps).zip(&remaps).for_each(|((b, m), rm)| {
        for r in &mut b.recs {
            let local = r.col() as usize;
            let bits = if r.tag() == tag::STR { u64::from(rm[local][r.bits as usize]) } else { r.bits };
            *r = Rec::new(bits, m[local], r.tag());
        }
    });
    drop(remaps);
    // Output rows in blocks; each block owns its slice of every column.
    const BLOCK: usize = 1 << 15;
    type Slices<'c> = (&'c mut [u8], &'c mut [f64], &'c mut [u32]);
    let blocks = n.div_ceil(BLOCK);
    let mut parts: Vec<Vec<Slices<'_>>> = (0..blocks).map(|_| Vec::with_capacity(out.len())).collect();
    for o in out.iter_mut() {
        let mut tags = o.tags.chunks_mut(BLOCK);
        let mut nums = o.nums.chunks_mut(BLOCK);
        let mut codes = o.codes.chunks_mut(BLOCK);
        for part in parts.iter_mut() {
            let c: &mut [u32] = codes.next().unwrap_or(&mut []);
            part.push((tags.next().expect("one block per part"), nums.next().expect("one block per part"), c));
        }
    }
    parts.into_par_iter().enumerate().for_each(|(k, mut cols)| {
        let base = k * BLOCK;
        let block = &src[base..(base + BLOCK).min(n)];
        for (j, &(p, l)) in block.iter().enumerate() {
            // Rows come from anywhere in the file: ask for a later row's records now so
            // they are in cache when reached.
            // Two steps: first where a row's records are, then the records.
            if let Some(&(p2, l2)) = block.get(j + 2 * PREFETCH_AHEAD) {
                pieces[p2 as usize].prefetch_row_end(l2 as usize);
            }
            if let Some(&(p2, l2)) = block.get(j + PREFETCH_AHEAD) {
                pieces[p2 as usize].prefetch_row(l2 as usize);
            }
            for &r in pieces[p as usize].row(l as usize) {
                let (tags, nums, codes) = &mut cols[r.col() as usize];
                let (tg, bits) = (r.tag(), r.bits);
                tags[j] = tg;
                if tg == tag::STR {
                    nums[j] = 0.0;
                    codes[j] = bits as u32;
                } else {
                    nums[j] = f64::from_bits(bits);
                    if let Some(c) = codes.get_mut(j) {
                        *c = u32::MAX;
                    }
                }
            }
        }
    });
    drop(pieces);
    (out, maps)
}

/// Interns small id sequences (a row's key order) so rows share them.
#[derive(Default, Clone, Debug)]
pub struct Interner {
    pub seqs: Vec<Vec<u32>>,
    index: HashMap<Vec<u32>, u32, foldhash::fast::RandomState>,
    /// The last id returned (rows mostly repeat their neighbour's key order).
    last: Option<u32>,
}

impl Interner {
    pub fn intern(&mut self, seq: &[u32]) -> u32 {
        if let Some(l) = self.last {
            if self.seqs[l as usize] == seq {
                return l;
            }
        }
        if let Some(&i) = self.index.get(seq) {
            self.last = Some(i);
            return i;
        }
        let i = self.seqs.len() as u32;
        self.seqs.push(seq.to_vec());
        self.index.insert(seq.to_vec(), i);
        self.last = Some(i);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_columns_follow_src_and_keep_the_last_value_of_a_row() {
        // Piece 0: rows 0..4; piece 1 names its columns in another order.
        let mut a = ColumnsBuilder::default();
        let x = a.id(Source::Top, b"x");
        let ans = a.id(Source::Top, b"answer");
        a.set(x, tag::INT, f64::from_bits(7));
        a.end_row(); // row 0: x = 7
        a.set_str(ans, "A");
        a.set(ans, tag::NULL, 0.0);
        a.end_row(); // row 1: answer set twice, null wins
        a.set(ans, tag::FLOAT, 2.5);
        a.set_str(ans, "B");
        a.end_row(); // row 2: "B" wins over 2.5
        a.set(x, tag::BOOL, 1.0);
        a.set_str(ans, "half");
        let late = a.id(Source::Top, b"late");
        a.set_str(late, "z");
        a.set_str(x, "s");
        a.undo_row(); // a failed line leaves nothing behind: no values, no `late`, x stays numeric
        a.end_row(); // row 3: empty
        let mut b = ColumnsBuilder::default();
        let ans_b = b.id(Source::Top, b"answer");
        let u = b.id(Source::Usage, b"x");
        b.set_str(ans_b, "B");
        b.set(u, tag::INT, f64::from_bits(3));
        b.end_row(); // piece 1 row 0
        assert_eq!((a.rows(), b.rows()), (4, 1));
        // Output order: piece 1 row 0, then piece 0 rows 3, 2, 1, 0.
        let src = [(1, 0), (0, 3), (0, 2), (0, 1), (0, 0)];
        let (m, maps) = merge_columns(vec![a, b], &src);
        let names: Vec<(Source, &str)> = m.iter().map(|c| (c.source, c.name.as_str())).collect();
        assert_eq!(names, [(Source::Top, "x"), (Source::Top, "answer"), (Source::Usage, "x")]);
        assert_eq!(maps, [vec![0, 1], vec![1, 2]]);
        let (x, ans, u) = (&m[0], &m[1], &m[2]);
        assert!(x.codes.is_empty() && u.codes.is_empty());
        assert_eq!(x.tags, [tag::ABSENT, tag::ABSENT, tag::ABSENT, tag::ABSENT, tag::INT]);
        assert_eq!(x.int(4), 7);
        assert_eq!(u.tags[0], tag::INT);
        assert_eq!(u.int(0), 3);
        assert_eq!(ans.tags, [tag::STR, tag::ABSENT, tag::STR, tag::NULL, tag::ABSENT]);
        assert_eq!(ans.codes.len(), 5);
        assert_eq!((ans.str_at(0), ans.str_at(2), ans.str_at(3)), (Some("B"), Some("B"), None));
        // One merged dictionary entry per distinct string, in piece order.
        assert_eq!(ans.dict[..2], ["A", "B"]);
        assert_eq!(ans.codes[3], u32::MAX);
    }
}
