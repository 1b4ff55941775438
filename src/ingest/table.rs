//! The columnar rollout table: one row per rollout line, one typed column per scalar
//! field, built per piece of the file and concatenated in file order.

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

/// Builds columns for one piece: sets values row by row and pads lazily.
#[derive(Default)]
pub struct ColumnsBuilder {
    pub cols: Vec<Column>,
    index: [HashMap<Box<[u8]>, u32, foldhash::fast::RandomState>; 3],
    dicts: Vec<HashMap<String, u32, foldhash::fast::RandomState>>,
}

impl ColumnsBuilder {
    /// Column id for a key (raw bytes of an unescaped key or a decoded escaped one).
    #[inline]
    pub fn id(&mut self, source: Source, key: &[u8]) -> u32 {
        if let Some(&i) = self.index[source as usize].get(key) {
            return i;
        }
        let i = self.cols.len() as u32;
        self.cols.push(Column::new(source, String::from_utf8_lossy(key).into_owned()));
        self.dicts.push(HashMap::default());
        self.index[source as usize].insert(key.into(), i);
        i
    }

    /// Predicted lookup: if column `guess` has this source and name, use it.
    #[inline]
    pub fn id_guess(&mut self, source: Source, key: &[u8], guess: Option<u32>) -> u32 {
        if let Some(g) = guess {
            let c = &self.cols[g as usize];
            if c.source == source && c.name.as_bytes() == key {
                return g;
            }
        }
        self.id(source, key)
    }

    #[inline]
    fn pad(c: &mut Column, row: usize) {
        if c.tags.len() < row {
            c.tags.resize(row, tag::ABSENT);
            c.nums.resize(row, 0.0);
            if !c.codes.is_empty() {
                c.codes.resize(row, u32::MAX);
            }
        }
    }

    /// Sets a numeric/null value (`t` one of NULL, INT, FLOAT, BOOL, LONG_STR).
    #[inline]
    pub fn set(&mut self, id: u32, row: usize, t: u8, v: f64) {
        let c = &mut self.cols[id as usize];
        Self::pad(c, row);
        if c.tags.len() > row {
            // A key repeated in one object: the last value wins (as in Python).
            c.tags[row] = t;
            c.nums[row] = v;
            if !c.codes.is_empty() {
                c.codes[row] = u32::MAX;
            }
            return;
        }
        c.tags.push(t);
        c.nums.push(v);
        if !c.codes.is_empty() {
            c.codes.push(u32::MAX);
        }
    }

    /// Sets a kept string.
    pub fn set_str(&mut self, id: u32, row: usize, s: &str) {
        let dict = &mut self.dicts[id as usize];
        let c = &mut self.cols[id as usize];
        Self::pad(c, row);
        if c.codes.len() < c.tags.len() {
            // The column's first kept string: codes start here, aligned with the tags.
            c.codes.resize(c.tags.len(), u32::MAX);
        }
        let code = match dict.get(s) {
            Some(&k) => k,
            None => {
                let k = c.dict.len() as u32;
                c.dict.push(s.to_string());
                dict.insert(s.to_string(), k);
                k
            }
        };
        Self::pad(c, row);
        if c.tags.len() > row {
            c.tags[row] = tag::STR;
            c.nums[row] = 0.0;
            c.codes[row] = code;
            return;
        }
        c.tags.push(tag::STR);
        c.nums.push(0.0);
        c.codes.push(code);
    }

    /// Pads every column to `rows` and returns them.
    ///
    /// Invariant: a column's `codes` is empty or exactly as long as its `tags`.
    pub fn finish(mut self, rows: usize) -> Vec<Column> {
        for c in &mut self.cols {
            Self::pad(c, rows);
        }
        self.cols
    }
}

/// Merges per-piece columns (each padded to its piece's row count) by (source, name),
/// in order of first appearance, into columns whose row `i` is piece row `src[i]`
/// (`(piece, row in piece)`): concatenation and reordering in one pass. Each merged
/// column takes its pieces' columns and frees them as soon as it is built, so memory
/// peaks near one copy of the columns, not two. Returns the merged columns and, per
/// piece, the map from local to merged column ids.
pub fn merge_columns(pieces: Vec<(Vec<Column>, usize)>, src: &[(u32, u32)]) -> (Vec<Column>, Vec<Vec<u32>>) {
    let mut order: Vec<(Source, String)> = Vec::new();
    let mut index: HashMap<(Source, String), u32> = HashMap::new();
    let mut maps = Vec::with_capacity(pieces.len());
    for (cols, _) in &pieces {
        let mut m = Vec::with_capacity(cols.len());
        for c in cols {
            let k = (c.source, c.name.clone());
            let id = *index.entry(k.clone()).or_insert_with(|| {
                order.push(k);
                (order.len() - 1) as u32
            });
            m.push(id);
        }
        maps.push(m);
    }
    let np = pieces.len();
    // Column-major: slots[merged column][piece].
    let mut slots: Vec<Vec<Option<Column>>> = (0..order.len()).map(|_| (0..np).map(|_| None).collect()).collect();
    for (p, ((cols, _), m)) in pieces.into_iter().zip(&maps).enumerate() {
        for (c, &g) in cols.into_iter().zip(m) {
            slots[g as usize][p] = Some(c);
        }
    }
    let out: Vec<Column> = slots
        .into_par_iter()
        .zip(order)
        .map(|(per_piece, (source, name))| {
            let mut o = Column::new(source, name);
            let has_strings = per_piece.iter().flatten().any(|c| !c.codes.is_empty());
            // Merged dictionary, in piece order, and each piece's code remap.
            let mut di: HashMap<&str, u32> = HashMap::new();
            let remaps: Vec<Vec<u32>> = per_piece
                .iter()
                .map(|c| match c {
                    Some(c) if !c.codes.is_empty() => c
                        .dict
                        .iter()
                        .map(|s| {
                            *di.entry(s.as_str()).or_insert_with(|| {
                                o.dict.push(s.clone());
                                (o.dict.len() - 1) as u32
                            })
                        })
                        .collect(),
                    _ => Vec::new(),
                })
                .collect();
            // Gathers, one array at a time; an absent piece column reads as ABSENT / 0.
            const NO_TAGS: [u8; 0] = [];
            let tags: Vec<&[u8]> = per_piece.iter().map(|c| c.as_ref().map_or(&NO_TAGS[..], |c| &c.tags)).collect();
            let nums: Vec<&[f64]> = per_piece.iter().map(|c| c.as_ref().map_or(&[][..], |c| &c.nums)).collect();
            o.tags =
                src.iter().map(|&(p, l)| tags[p as usize].get(l as usize).copied().unwrap_or(tag::ABSENT)).collect();
            o.nums = src.iter().map(|&(p, l)| nums[p as usize].get(l as usize).copied().unwrap_or(0.0)).collect();
            if has_strings {
                let codes: Vec<&[u32]> = per_piece.iter().map(|c| c.as_ref().map_or(&[][..], |c| &c.codes)).collect();
                o.codes = src
                    .iter()
                    .map(|&(p, l)| match codes[p as usize].get(l as usize) {
                        Some(&k) if k != u32::MAX => remaps[p as usize][k as usize],
                        _ => u32::MAX,
                    })
                    .collect();
            }
            o
        })
        .collect();
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
    fn a_first_string_after_absent_rows_keeps_codes_aligned() {
        let mut b = ColumnsBuilder::default();
        let other = b.id(Source::Top, b"x");
        b.set(other, 0, tag::INT, 0.0);
        let id = b.id(Source::Top, b"answer");
        // The column appears at row 5: rows 0..5 are absent.
        b.set_str(id, 5, "A");
        b.set(id, 7, tag::NULL, 0.0);
        b.set_str(id, 8, "B");
        let cols = b.finish(12);
        let c = &cols[id as usize];
        assert_eq!(c.codes.len(), c.tags.len());
        assert_eq!((c.str_at(5), c.str_at(8), c.str_at(6), c.str_at(7)), (Some("A"), Some("B"), None, None));
        let (merged, _) = merge_columns(vec![(cols, 12)], &(0..12u32).rev().map(|l| (0, l)).collect::<Vec<_>>());
        let m = merged.iter().find(|c| c.name == "answer").unwrap();
        assert_eq!((m.str_at(6), m.str_at(3)), (Some("A"), Some("B")));
    }
}
