//! A unified-style line diff for `setup --dry-run` (the files are small:
//! a plain longest-common-subsequence table is enough).

/// `--- path` / `+++ path` and every line, prefixed `-`, `+` or ` `.
pub fn diff(path: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let old_name = if old.is_empty() { "/dev/null" } else { path };
    let mut out = format!("--- {old_name}\n+++ {path}\n");
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines_are_marked() {
        assert_eq!(
            diff("f", "a\nb\nc\n", "a\nx\nc\nd\n"),
            "--- f\n+++ f\n a\n+x\n-b\n c\n+d\n"
        );
        assert!(diff("f", "", "a\n").starts_with("--- /dev/null\n+++ f\n+a\n"));
    }
}
