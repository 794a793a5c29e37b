//! Did-you-mean hints: the closest known name to a misspelt one.

/// The closest of `candidates` to `word`, if one is close enough to be a
/// likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .map(|c| (strsim::normalized_damerau_levenshtein(word, c), c))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
