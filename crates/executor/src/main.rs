//! `actiongate-executor`: the reference executor. Its protocol lands with the
//! executor issue; until then it only reports its version.

fn version_line() -> String {
    format!("actiongate-executor {}", env!("CARGO_PKG_VERSION"))
}

fn main() {
    println!("{}", version_line());
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_line_names_the_binary_and_version() {
        let line = super::version_line();
        assert!(line.starts_with("actiongate-executor "));
        assert!(line.ends_with(env!("CARGO_PKG_VERSION")));
    }
}
