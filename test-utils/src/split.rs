//! Cutting a byte stream into chunks at arbitrary points, as a network would, for the
//! decoders' "same result however the bytes are split" property tests.

/// `bytes` cut at each of `cuts` (taken modulo `bytes.len() + 1`, in any order): the
/// chunks, in order, that concatenate back to `bytes`. Empty chunks are kept, since a
/// decoder must accept them too.
pub fn split_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut prev = 0;
    for p in points {
        chunks.push(&bytes[prev..p]);
        prev = p;
    }
    chunks.push(&bytes[prev..]);
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_concatenate_back() {
        // 13 wraps to 6 (modulo len + 1): a cut at the very end leaves an empty chunk.
        let chunks = split_at(b"abcdef", &[4, 1, 13]);
        assert_eq!(chunks, vec![&b"a"[..], b"bcd", b"ef", b""]);
        assert_eq!(chunks.concat(), b"abcdef");
    }
}
