//! What a small model cannot work out from a file's text, said on one line with it
//! (`with_header` in `fs.rs` places it): the open and done items of a checklist, and the
//! totals of a table.
//!
//! # Decisions
//! - **Why**: the Qwen2.5-Coder models read a file right and then count or add it up
//!   wrong. Asked "how many things are still open on my todo list?", the 1.5B read
//!   `todo.md` (three `- [ ]`, two `- [x]`) and answered 5, then 2; asked "which region
//!   sold the most units?", it had `sales.csv` and named no region (issue 35's eval,
//!   tuning part, 0/3 in each of the last four passes). `list_dir`'s tally by extension
//!   took "how many python scripts" from 0/3 to 3/3 on both models: the same idea for
//!   the two shapes of file people most often ask a count or a total of.
//! - **Only what the text holds, exactly**: a checklist is the lines that start with a
//!   list marker and a box (`- [ ]`, `* [x]`, `1. [X]`); a table is a `.csv` or `.tsv`
//!   file whose rows all have the header's fields, with no quoting (a `"` anywhere, and
//!   no summary: splitting quoted fields by hand would sometimes be wrong, and a wrong
//!   total is worse than none).
//! - **Bounded**: a table's summary names at most [`MAX_NUMBERS`] numeric columns and
//!   groups by at most [`MAX_GROUPS`] columns of at most [`MAX_GROUP_VALUES`] values,
//!   so it stays one line whatever the file.
//! - **No summary** for fewer than two items or two rows: nothing to count or add.

use std::collections::BTreeMap;

/// Numeric columns a table's summary names, at most.
const MAX_NUMBERS: usize = 3;
/// Columns a table's numbers are grouped by, at most.
const MAX_GROUPS: usize = 2;
/// Distinct values a column may hold to be grouped by.
const MAX_GROUP_VALUES: usize = 12;

/// What a checklist's text counts: `a checklist, 3 open "[ ]", 2 done "[x]"`.
pub(super) fn counts(text: &str) -> Option<String> {
    checklist(text)
}

/// What a table (the file shown as `shown`) adds up to, when it is no checklist:
/// `8 rows under the header; ...`.
pub(super) fn totals(shown: &str, text: &str) -> Option<String> {
    checklist(text).map_or_else(|| table(shown, text), |_| None)
}

/// `a checklist, N open "[ ]", M done "[x]"`, for at least two items.
fn checklist(text: &str) -> Option<String> {
    let (mut open, mut done) = (0, 0);
    for line in text.lines() {
        match checkbox(line) {
            Some(true) => done += 1,
            Some(false) => open += 1,
            None => {}
        }
    }
    (open + done >= 2).then(|| format!("a checklist, {open} open \"[ ]\", {done} done \"[x]\""))
}

/// Whether a list item's box is ticked: `None` for a line that is not one.
fn checkbox(line: &str) -> Option<bool> {
    let line = line.trim_start();
    let rest = match line.strip_prefix(['-', '*', '+']) {
        Some(rest) => rest,
        None => {
            let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            line[digits..]
                .strip_prefix(['.', ')'])
                .filter(|_| digits > 0)?
        }
    };
    let rest = rest.strip_prefix(' ')?.trim_start();
    match rest.get(..3)? {
        "[ ]" => Some(false),
        "[x]" | "[X]" => Some(true),
        _ => None,
    }
}

/// The summary of a `.csv` or `.tsv` table: its rows, and for each numeric column its
/// total, its highest and lowest row (named by the first text column), and its sums by
/// each column that groups rows, most first.
fn table(shown: &str, text: &str) -> Option<String> {
    let lower = shown.to_lowercase();
    let sep = if lower.ends_with(".csv") {
        ','
    } else if lower.ends_with(".tsv") {
        '\t'
    } else {
        return None;
    };
    if text.contains('"') {
        return None;
    }
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next()?.split(sep).map(str::trim).collect();
    if header.iter().all(|h| number(h).is_some()) {
        return None;
    }
    let rows: Vec<Vec<&str>> = lines
        .map(|l| l.split(sep).map(str::trim).collect())
        .collect();
    if rows.len() < 2 || header.len() < 2 || rows.iter().any(|r| r.len() != header.len()) {
        return None;
    }
    let numeric = |col: usize| rows.iter().all(|r| number(r[col]).is_some());
    let (numbers, texts): (Vec<usize>, Vec<usize>) = (0..header.len()).partition(|&c| numeric(c));
    let mut said = vec![format!("{} rows under the header", rows.len())];
    let label = texts.first().copied();
    let groups: Vec<usize> = texts
        .iter()
        .copied()
        .filter(|&c| groups_rows(&rows, c))
        .take(MAX_GROUPS)
        .collect();
    for &col in numbers.iter().take(MAX_NUMBERS) {
        said.push(column(&header, &rows, col, label));
        for &by in &groups {
            said.push(grouped(&header, &rows, col, by));
        }
    }
    Some(said.join("; "))
}

/// A cell as a number: plain decimal notation only (`1200`, `-3.5`), not `inf` or `1e3`.
fn number(cell: &str) -> Option<f64> {
    let plain = !cell.is_empty()
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '-');
    plain.then(|| cell.parse::<f64>().ok()).flatten()
}

/// Whether column `col` sorts rows into a few groups: some value repeats, and there are
/// between 2 and [`MAX_GROUP_VALUES`] values.
fn groups_rows(rows: &[Vec<&str>], col: usize) -> bool {
    let mut values: Vec<&str> = rows.iter().map(|r| r[col]).collect();
    values.sort_unstable();
    values.dedup();
    (2..=MAX_GROUP_VALUES).contains(&values.len()) && values.len() < rows.len()
}

/// `units: total 1095, highest 150 (east), lowest 70 (west)`.
fn column(header: &[&str], rows: &[Vec<&str>], col: usize, label: Option<usize>) -> String {
    let value = |r: &Vec<&str>| number(r[col]).unwrap_or_default();
    let total: f64 = rows.iter().map(value).sum();
    let mut said = format!("{}: total {}", header[col], shown(total));
    let named = |r: &Vec<&str>| label.map_or(String::new(), |l| format!(" ({})", r[l]));
    let by_value = |a: &&Vec<&str>, b: &&Vec<&str>| value(a).total_cmp(&value(b));
    if let (Some(high), Some(low)) = (rows.iter().max_by(by_value), rows.iter().min_by(by_value)) {
        said.push_str(&format!(
            ", highest {}{}, lowest {}{}",
            shown(value(high)),
            named(high),
            shown(value(low)),
            named(low)
        ));
    }
    said
}

/// `units by region, most first: east 290, north 250, south 205, west 150`.
fn grouped(header: &[&str], rows: &[Vec<&str>], col: usize, by: usize) -> String {
    let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
    for r in rows {
        *sums.entry(r[by]).or_default() += number(r[col]).unwrap_or_default();
    }
    let mut sums: Vec<(&str, f64)> = sums.into_iter().collect();
    sums.sort_by(|a, b| b.1.total_cmp(&a.1));
    let listed: Vec<String> = sums
        .iter()
        .map(|(name, sum)| format!("{name} {}", shown(*sum)))
        .collect();
    format!(
        "{} by {}, most first: {}",
        header[col],
        header[by],
        listed.join(", ")
    )
}

/// A sum as people write it: whole numbers without a point, others to two places.
fn shown(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        let two = format!("{n:.2}");
        two.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one summary of the file, bracketed as shown: its counts or its totals,
    /// never both.
    fn check(shown: &str, text: &str, want: Option<&str>) {
        let (counts, totals) = (counts(text), totals(shown, text));
        assert!(counts.is_none() || totals.is_none(), "{shown}: both");
        let said = counts.or(totals).map(|s| format!("[{s}]"));
        assert_eq!(said.as_deref(), want, "{shown}: {text:?}");
    }

    #[test]
    fn checklists_are_counted() {
        let todo = "# To do\n\n- [ ] renew passport\n- [x] book dentist\n- [ ] call the plumber\n\
                    - [x] pay rent\n- [ ] send the invoices\n";
        check(
            "todo.md",
            todo,
            Some("[a checklist, 3 open \"[ ]\", 2 done \"[x]\"]"),
        );
        check(
            "plan.md",
            "1. [X] draft\n2) [ ] review\n  * [ ] nested\n+ [x] ship",
            Some("[a checklist, 2 open \"[ ]\", 2 done \"[x]\"]"),
        );
        // One item, boxes that are not list items, and plain lists: nothing to count.
        check("a.md", "- [ ] only one\n", None);
        check("a.md", "[ ] no marker\n[x] none here\n", None);
        check("a.md", "- [link](x)\n- [y] other\n- plain\n", None);
        check("a.md", "-[ ] no space\n-[x] again\n", None);
    }

    #[test]
    fn tables_are_added_up() {
        let sales = "region,month,units\nnorth,jan,120\nsouth,jan,95\neast,jan,140\nwest,jan,80\n\
                     north,feb,130\nsouth,feb,110\neast,feb,150\nwest,feb,70\n";
        check(
            "data/sales.csv",
            sales,
            Some(
                "[8 rows under the header; units: total 895, highest 150 \
                 (east), lowest 70 (west); units by region, most first: east 290, north 250, \
                 south 205, west 150; units by month, most first: feb 460, jan 435]",
            ),
        );
        check(
            "cities.TSV",
            "city\tpop\nLagos\t15.5\nOslo\t0.7\n",
            Some(
                "[2 rows under the header; pop: total 16.2, highest 15.5 (Lagos), lowest 0.7 (Oslo)]",
            ),
        );
        // Numbers only: no label, no groups.
        check(
            "n.csv",
            "a,b\n1,2\n3,4\n",
            Some(
                "[2 rows under the header; a: total 4, highest 3, lowest 1; b: total 6, highest 4, lowest 2]",
            ),
        );
    }

    #[test]
    fn tables_it_cannot_be_sure_of_are_left_alone() {
        // One row, quoted fields, ragged rows, no header, not a table's extension.
        check("a.csv", "name,size\nsmall,1\n", None);
        check("a.csv", "name,size\n\"a, b\",1\nc,2\n", None);
        check("a.csv", "name,size\na,1\nb\n", None);
        check("a.txt", "name,size\na,1\nb,2\n", None);
        // A first line of numbers is no header.
        check("a.csv", "1,2\n3,4\n5,6\n", None);
        // `inf`, `1e3` and empty cells are not numbers.
        check(
            "a.csv",
            "k,v\na,inf\nb,1e3\n",
            Some("[2 rows under the header]"),
        );
    }
}
