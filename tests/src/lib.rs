//! Black-box tests of the actiongate binary live in `tests/`; this library is empty.
