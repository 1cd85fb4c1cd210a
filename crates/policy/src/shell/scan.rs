//! Whether a command is written in the fast path's alphabet with words one
//! space apart, and where its first word ends: one table lookup per byte
//! without a branch, then the spaces eight bytes at a time.
//!
//! The space test works on a `u64` with carry-free arithmetic (no
//! intermediate byte reaches 256), so a byte's answer never depends on its
//! neighbours; tests compare both steps with a byte-by-byte definition for
//! every byte value and for random strings. (Testing the whole alphabet
//! eight bytes at a time took seven range tests per word, about 50
//! instructions per eight bytes against 16 for the table.)

/// One in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The low seven bits of every byte.
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const SPACES: u64 = ONES * b' ' as u64;

/// 1 for every byte that is neither a space nor a word character of the
/// fast path's alphabet (which is that of [`super::fast`] without `|`).
const OTHER: [u8; 256] = {
    let mut other = [1; 256];
    let mut b = 0;
    while b < 128 {
        if (b as u8).is_ascii_alphanumeric() {
            other[b] = 0;
        }
        b += 1;
    }
    let extra = b" _./:,=@%+-";
    let mut i = 0;
    while i < extra.len() {
        other[extra[i] as usize] = 0;
        i += 1;
    }
    other
};

/// The high bit of each byte of `x` that is a space, and no other bit:
/// `(y & 0x7f) + 0x7f` has its high bit set iff the low seven bits of `y`
/// are not all zero, `| y` adds the high bit of `y`, so the complement's
/// high bit is set iff `y`, the byte XOR a space, is zero.
fn spaces(x: u64) -> u64 {
    let y = x ^ SPACES;
    !(((y & LOW7) + LOW7) | y | LOW7)
}

/// What [`single_spaced`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Words {
    /// The length of the first word (the whole input if it has one word).
    pub(super) first_len: usize,
    /// The first word as a little-endian `u64`, zero past its end, if it
    /// has at most eight bytes (as [`super::commands::name_key`] has it).
    pub(super) first_key: Option<u64>,
}

/// Whether `bytes` are words of the alphabet one space apart (no leading,
/// trailing or double space, not empty), and if so where the first word
/// ends.
pub(super) fn single_spaced(bytes: &[u8]) -> Option<Words> {
    if bytes.first().is_none_or(|&b| b == b' ') || bytes.last() == Some(&b' ') {
        return None;
    }
    // Every byte a word character or a space, and no space right after
    // another: one table lookup per byte, and for each chunk of eight the
    // spaces that follow a space in it or end the chunk before. Both are
    // gathered without a branch and tested once.
    let (chunks, tail) = bytes.as_chunks::<8>();
    let mut other = 0;
    let mut double = 0;
    let mut carry = 0;
    for chunk in chunks {
        for &b in chunk {
            other |= OTHER[usize::from(b)];
        }
        let space = spaces(u64::from_le_bytes(*chunk));
        double |= ((space << 8) | carry) & space;
        carry = space >> 56;
    }
    for &b in tail {
        other |= OTHER[usize::from(b)];
    }
    if other != 0 || double != 0 {
        return None;
    }
    // The last chunk may overlap the one before; every pair of neighbours
    // in the overlap was checked there.
    let last = bytes
        .len()
        .checked_sub(8)
        .and_then(|end| <[u8; 8]>::try_from(bytes.get(end..)?).ok());
    let first = match (chunks.first(), last) {
        (Some(first), Some(last)) => {
            if !tail.is_empty() {
                let space = spaces(u64::from_le_bytes(last));
                if (space << 8) & space != 0 {
                    return None;
                }
            }
            u64::from_le_bytes(*first)
        }
        _ => {
            // Fewer than eight bytes: zero past the end (not a space).
            let mut padded = [0; 8];
            for (to, from) in padded.iter_mut().zip(tail) {
                *to = *from;
            }
            let x = u64::from_le_bytes(padded);
            let space = spaces(x);
            if (space << 8) & space != 0 {
                return None;
            }
            x
        }
    };
    let first_len = bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len());
    let first_key = (1..=8)
        .contains(&first_len)
        .then(|| first & (u64::MAX >> (64 - 8 * first_len)));
    Some(Words {
        first_len,
        first_key,
    })
}

/// Calls `f` with the index of every space in `bytes`, in order: eight
/// bytes at a time, then each set bit of the chunk's space mask (only bit
/// 7 of a space's lane is set). (Calling it from [`single_spaced`]'s loop
/// made that loop slower for callers that need no spaces.)
pub(super) fn for_each_space(bytes: &[u8], mut f: impl FnMut(usize)) {
    let (chunks, tail) = bytes.as_chunks::<8>();
    for (n, chunk) in chunks.iter().enumerate() {
        let mut mask = spaces(u64::from_le_bytes(*chunk));
        while mask != 0 {
            f(n * 8 + (mask.trailing_zeros() / 8) as usize);
            mask &= mask - 1;
        }
    }
    let base = chunks.len() * 8;
    for (i, &b) in tail.iter().enumerate() {
        if b == b' ' {
            f(base + i);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    /// The per-byte definition: the alphabet of `fast`, without `|`.
    fn is_word(b: u8) -> bool {
        b.is_ascii_alphanumeric() || b"_./:,=@%+-".contains(&b)
    }

    /// `single_spaced`, byte by byte.
    fn reference(bytes: &[u8]) -> Option<usize> {
        if bytes.is_empty() || bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ') {
            return None;
        }
        if bytes.windows(2).any(|w| w == b"  ") {
            return None;
        }
        if !bytes.iter().all(|&b| b == b' ' || is_word(b)) {
            return None;
        }
        Some(bytes.iter().position(|&b| b == b' ').unwrap_or(bytes.len()))
    }

    fn key(word: &[u8]) -> Option<u64> {
        (1..=8).contains(&word.len()).then(|| {
            let mut padded = [0; 8];
            padded[..word.len()].copy_from_slice(word);
            u64::from_le_bytes(padded)
        })
    }

    fn check(bytes: &[u8]) {
        let got = single_spaced(bytes);
        assert_eq!(got.map(|w| w.first_len), reference(bytes), "{bytes:?}");
        if let Some(w) = got {
            assert_eq!(w.first_key, key(&bytes[..w.first_len]), "{bytes:?}");
        }
    }

    #[test]
    fn the_table_holds_the_alphabet() {
        for b in 0..=255u8 {
            assert_eq!(OTHER[usize::from(b)] == 0, b == b' ' || is_word(b), "{b}");
        }
    }

    #[test]
    fn every_byte_in_every_lane_is_tested_for_a_space_alone() {
        for b in 0..=255u8 {
            for lane in 0..8 {
                for fill in [b'a', b' ', 0, 0x80, 0xff, 0x7f, b'!'] {
                    let mut chunk = [fill; 8];
                    chunk[lane] = b;
                    let expected = chunk
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| **c == b' ')
                        .fold(0, |mask, (i, _)| mask | 0x80 << (8 * i));
                    assert_eq!(
                        spaces(u64::from_le_bytes(chunk)),
                        expected,
                        "{b} in lane {lane} among {fill}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_byte_at_every_position_of_short_inputs() {
        for len in 1..=25 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'x'; len];
                    bytes[at] = b;
                    check(&bytes);
                }
            }
        }
    }

    /// Every way to place spaces in inputs of up to 17 bytes, so every
    /// pair of neighbours at every chunk edge and in the overlapping last
    /// chunk.
    #[test]
    fn every_placement_of_spaces() {
        for len in 1..=17 {
            for spaces in 0..1u32 << len {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| {
                        if spaces >> i & 1 == 1 {
                            b' '
                        } else {
                            b'a' + i as u8
                        }
                    })
                    .collect();
                check(&bytes);
            }
        }
    }

    #[test]
    fn spaces_across_chunk_edges() {
        for s in [
            "abcdefg  x",
            "abcdefgh  x",
            "abcdefg h",
            "abcdefgh i",
            "a b c d e f g h i j",
            "ls -la src/module_00/lib.rs src/module_0",
            "ls",
            "abcdefgh",
            "abcdefghi",
            " ",
            "",
            "a ",
            " a",
        ] {
            check(s.as_bytes());
        }
    }

    fn spaces_of(bytes: &[u8]) -> Vec<usize> {
        let mut found = Vec::new();
        for_each_space(bytes, |at| found.push(at));
        found
    }

    #[test]
    fn every_space_is_found_in_every_lane() {
        for len in 0..=20 {
            for at in 0..len {
                for fill in [b'a', 0x80, 0xa0, b'\t', 0xff] {
                    let mut bytes = vec![fill; len];
                    bytes[at] = b' ';
                    assert_eq!(spaces_of(&bytes), [at], "{len} {at} {fill}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn spaces_are_found_as_a_byte_search_finds_them(bytes in prop::collection::vec(prop::sample::select(b" a\x80\xa0\xff!".to_vec()), 0..40)) {
            let expected: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] == b' ').collect();
            prop_assert_eq!(spaces_of(&bytes), expected);
        }

        #[test]
        fn random_bytes_agree_with_the_table(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            check(&bytes);
        }

        /// Mostly valid commands, so that the interesting cases are common.
        #[test]
        fn random_commands_agree_with_the_table(
            bytes in prop::collection::vec(prop::sample::select(b"ab =|% \n\x80\xffZ_:".to_vec()), 0..40)
        ) {
            check(&bytes);
        }
    }
}
