//! Plain-text tables, as `crawl` and `check` print them: each column as
//! wide as its widest cell plus two spaces, the last one unpadded, trailing
//! spaces trimmed.

/// `rows` (the header first; every row as long as the header) as lines.
pub fn render(rows: &[Vec<String>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < cols {
                line.extend(std::iter::repeat_n(
                    ' ',
                    width[c] - cell.chars().count() + 2,
                ));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up_and_lines_end_clean() {
        let rows = vec![
            vec!["A".to_string(), "BB".into(), "C".into()],
            vec!["long cell".into(), "-".into(), "".into()],
        ];
        assert_eq!(super::render(&rows), "A          BB  C\nlong cell  -\n");
    }
}
