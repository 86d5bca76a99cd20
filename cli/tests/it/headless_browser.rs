//! Debian's `chromium`, headless, driven by its own flags (no driver, no protocol client):
//! each look at a page is one run of the browser that loads it, lets its scripts run for a
//! budget of virtual time, and prints the DOM it ended with (`--dump-dom`) or saves a
//! screenshot; with `--enable-logging=stderr` every console message and uncaught exception
//! is a `CONSOLE` line on its standard error, which is how a look reports the page's errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Virtual time the page's scripts get per look: a few of the dashboard's one-second polls.
const VIRTUAL_TIME_BUDGET_MS: u64 = 3_500;
/// Wall time a look may take before the browser is killed and the look fails.
const LOOK_MS_MAX: u64 = 90_000;
const WINDOW_SIZE: &str = "1280,2400";

/// What one look saw.
pub struct Look {
    /// The DOM as serialized after the budget (empty for a screenshot).
    pub dom: String,
    /// The page's console messages and uncaught exceptions.
    pub console: Vec<String>,
}

/// The browser, found on PATH; a test without it fails, saying how to install it.
pub struct HeadlessBrowser {
    binary: PathBuf,
    /// Where each look's standard error is kept, next to the test's other logs.
    log_dir: PathBuf,
    /// Flags every look adds.
    flags: Vec<String>,
    looks: usize,
}

impl HeadlessBrowser {
    pub fn find(log_dir: &Path) -> Self {
        let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
            let output = Command::new(name).arg("--version").output().ok()?;
            output.status.success().then(|| PathBuf::from(name))
        });
        let binary = found.unwrap_or_else(|| {
            panic!("this test needs Debian's chromium: apt-get install chromium (CI installs it)")
        });
        Self { binary, log_dir: log_dir.to_path_buf(), flags: Vec::new(), looks: 0 }
    }

    /// Like `find`, for pages served with a test's throwaway certificate (chromium takes no
    /// CA file; the TLS test checks the certificate against its CA with its own client).
    pub fn trusting_any_certificate(log_dir: &Path) -> Self {
        let browser = Self::find(log_dir);
        Self { flags: vec!["--ignore-certificate-errors".to_string()], ..browser }
    }

    /// Loads `url` and returns the DOM its scripts left and the console's messages.
    pub fn dump_dom(&mut self, url: &str) -> Look {
        let (stdout, console) = self.run(url, &["--dump-dom".to_string()]);
        Look { dom: stdout, console }
    }

    /// Loads `url` and saves a PNG of the page at `png`; the console's messages.
    pub fn screenshot(&mut self, url: &str, png: &Path) -> Vec<String> {
        let flag = format!("--screenshot={}", png.display());
        let (_, console) = self.run(url, &[flag]);
        assert!(png.is_file(), "chromium saved no screenshot at {}", png.display());
        console
    }

    fn run(&mut self, url: &str, action: &[String]) -> (String, Vec<String>) {
        self.looks += 1;
        let stderr_path = self.log_dir.join(format!("chromium-{}.log", self.looks));
        let stderr = std::fs::File::create(&stderr_path).expect("create the browser's log");
        let stdout_path = self.log_dir.join(format!("chromium-{}.out", self.looks));
        let stdout = std::fs::File::create(&stdout_path).expect("create the browser's output");
        let profile = tempfile::tempdir().expect("a throwaway browser profile");
        let mut child = Command::new(&self.binary)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
            .args(["--no-first-run", "--disable-extensions", "--disable-background-networking"])
            .args(["--enable-logging=stderr", "--v=0"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={WINDOW_SIZE}"))
            .arg(format!("--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}"))
            .args(&self.flags)
            .args(action)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("start chromium");
        let deadline = Instant::now() + Duration::from_millis(LOOK_MS_MAX);
        let status = loop {
            if let Some(status) = child.try_wait().expect("poll chromium") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium took over {LOOK_MS_MAX} ms on {url}; its log: {}",
                    stderr_path.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        assert!(status.success(), "chromium failed ({status}) on {url}:\n{log}");
        let dom = std::fs::read_to_string(&stdout_path).unwrap_or_default();
        (dom, console_lines(&log))
    }
}

/// The console's lines in chromium's log (`...:CONSOLE:...] "message", source: ...`).
fn console_lines(log: &str) -> Vec<String> {
    log.lines().filter(|line| line.contains(":CONSOLE")).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Console lines are told from the rest of chromium's log.
    #[test]
    fn console_lines_are_picked_out() {
        let log = "[1:1:1126/032000.688480:INFO:CONSOLE:1] \"boom\", source: http://x/app.js (3)\n\
                   [1:1:1126/032000.688480:WARNING:gpu.cc(12)] no GPU\n";
        assert_eq!(console_lines(log).len(), 1);
    }
}
