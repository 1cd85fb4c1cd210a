//! A gauge of things open (long-polls, event streams) that counts one for
//! as long as its guard lives: also when the future holding it is dropped
//! mid-wait because the client went away.

/// One open thing, counted in the gauge `name` until dropped.
#[derive(Debug)]
pub struct OpenGauge(&'static str);

impl OpenGauge {
    /// Counts one more in `name`.
    pub fn new(name: &'static str) -> OpenGauge {
        metrics::gauge!(name).increment(1.0);
        OpenGauge(name)
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}
