//! A count with its noun, singular for one: `1 entry`, `2 entries`.

/// `n` and the noun for it: `one` when `n` is 1, else `many`.
pub(crate) fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(1u32, "entry", "entries"), "1 entry");
        assert_eq!(count(0u32, "entry", "entries"), "0 entries");
        assert_eq!(count(2u64, "request", "requests"), "2 requests");
    }
}
