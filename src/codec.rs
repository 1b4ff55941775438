//! The encodings of rollstat's own files: little-endian lengths and values for the
//! rows of slices and input slices, and bincode for serde-derived types (the merge's
//! plans and shares, the input slices' headers). A leaf: it imports nothing of
//! rollstat's, so every layer may use it.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// `value` in bincode.
pub(crate) fn encode(value: impl Serialize) -> std::io::Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).map_err(std::io::Error::other)
}

/// Decodes a `T` from the start of `data`: it and the bytes it took, or `None` for
/// damaged data. A damaged length cannot allocate much more than `data` holds: a
/// string's length is claimed against a limit, the least of these above 8 bytes per
/// byte of `data`, and serde reserves at most 1 MiB for a sequence before its elements
/// (each of which takes bytes) are read.
pub(crate) fn decode<T: DeserializeOwned>(data: &[u8]) -> Option<(T, usize)> {
    fn within<T: DeserializeOwned, const N: usize>(data: &[u8]) -> Option<(T, usize)> {
        bincode::serde::decode_from_slice(data, bincode::config::standard().with_limit::<N>()).ok()
    }
    match data.len().saturating_mul(8) {
        n if n <= 1 << 24 => within::<T, { 1 << 24 }>(data),
        n if n <= 1 << 28 => within::<T, { 1 << 28 }>(data),
        n if n <= 1 << 32 => within::<T, { 1 << 32 }>(data),
        _ => within::<T, { 1 << 36 }>(data),
    }
}

/// [`decode`] of exactly all of `data`.
pub(crate) fn decode_all<T: DeserializeOwned>(data: &[u8]) -> Option<T> {
    decode(data).and_then(|(v, n)| (n == data.len()).then_some(v))
}

/// A writer of little-endian lengths and values.
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// A reader of what [`Enc`] wrote; every read is bounds-checked.
pub(crate) struct Dec<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) at: usize,
}

impl Dec<'_> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
    }
    /// A count of items of at least `size` bytes each, checked against what is left.
    pub(crate) fn len(&mut self, size: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(size)? <= self.b.len() - self.at).then_some(n)
    }
    pub(crate) fn str(&mut self) -> Option<String> {
        let n = self.len(1)?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}
