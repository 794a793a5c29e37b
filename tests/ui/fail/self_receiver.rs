use kesoku::tool;

struct Counter(u32);

impl Counter {
    /// Adds to the counter.
    ///
    /// # Arguments
    /// * `by` - How much to add.
    #[tool]
    fn add(&self, by: u32) -> u32 {
        self.0 + by
    }
}

fn main() {}
