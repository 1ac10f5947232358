//! The WebDriver side of the browser tests (headless Chromium driven by chromedriver), shared by
//! `browser.rs` and its modules: finding the tools, starting a session, and the waits and clicks
//! the tests are written in.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// How long chromedriver may take to start.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a page may take to show what a test waits for.
pub const UI_TIMEOUT: Duration = Duration::from_secs(20);

/// Paths of the browser and its driver.
pub struct Tools {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

impl Tools {
    /// The installed browser, or `None` (after saying so) when it is missing outside CI.
    pub fn find() -> Option<Self> {
        let chromium = std::env::var_os("CHROMIUM").map(PathBuf::from).or_else(|| {
            ["chromium", "chromium-browser", "google-chrome"]
                .into_iter()
                .find_map(on_path)
        });
        let chromedriver = std::env::var_os("CHROMEDRIVER")
            .map(PathBuf::from)
            .or_else(|| on_path("chromedriver"));
        match (chromium, chromedriver) {
            (Some(chromium), Some(chromedriver)) => Some(Self {
                chromium,
                chromedriver,
            }),
            _ if std::env::var_os("CI").is_some() => panic!(
                "chromium not installed: apt-get install -y chromium chromium-driver \
                 (or set CHROMIUM and CHROMEDRIVER)"
            ),
            _ => {
                println!("skipped: chromium not installed");
                None
            }
        }
    }
}

pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    })
}

/// A chromedriver process and a headless Chromium session through it.
pub struct Browser {
    pub client: Client,
    pub driver: Child,
}

impl Browser {
    /// Waits until the page's path is `path`.
    pub async fn wait_for_path(&self, path: &str, what: &str) {
        self.wait_until(what, || async {
            self.client
                .current_url()
                .await
                .is_ok_and(|url| url.path() == path)
        })
        .await;
    }

    pub async fn start(tools: &Tools) -> Self {
        let port = free_port();
        let mut driver = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                let _ = driver.kill();
                panic!("chromedriver did not listen on port {port}");
            }
            if let Ok(Some(status)) = driver.try_wait() {
                panic!("chromedriver exited: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("unhandledPromptBehavior".into(), json!("ignore"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": tools.chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-extensions", "--no-first-run", "--window-size=1280,900",
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|error| {
                let _ = driver.kill();
                panic!("no browser session: {error}")
            });
        Self { client, driver }
    }

    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|error| panic!("open {url}: {error}"));
    }

    pub async fn exists(&self, css: &str) -> bool {
        self.client.find(Locator::Css(css)).await.is_ok()
    }

    pub async fn click(&self, css: &str) {
        let element = self
            .client
            .wait()
            .at_most(UI_TIMEOUT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no {css} to click: {error}"));
        element
            .click()
            .await
            .unwrap_or_else(|error| panic!("click {css}: {error}"));
    }

    /// Waits until the element's text is exactly `expected`.
    pub async fn wait_text(&self, css: &str, expected: &str) {
        let mut last = String::new();
        let deadline = Instant::now() + UI_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
            {
                if text.trim() == expected {
                    return;
                }
                last = text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css}: expected {expected:?}, last saw {last:?}");
    }

    /// Waits until the element's text contains `needle`.
    pub async fn wait_text_contains(&self, css: &str, needle: &str, what: &str) {
        let mut last = String::new();
        let deadline = Instant::now() + UI_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
            {
                if text.contains(needle) {
                    return;
                }
                last = text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: {css} never contained {needle:?}; last saw {last:?}");
    }

    pub async fn wait_until<F, Fut>(&self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + UI_TIMEOUT;
        while !check().await {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the alert or confirm dialog open now (waiting for it to open).
    pub async fn alert_text(&self) -> String {
        let deadline = Instant::now() + UI_TIMEOUT;
        loop {
            match self.client.get_alert_text().await {
                Ok(text) => return text,
                Err(error) if Instant::now() > deadline => panic!("no dialog opened: {error}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Waits until the element's visible text contains `needle`; returns the text.
    pub async fn wait_text_containing(&self, css: &str, needle: &str) -> String {
        let mut last = String::new();
        let deadline = Instant::now() + UI_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = element.text().await
            {
                if text.contains(needle) {
                    return text;
                }
                last = text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} never contained {needle:?}; last saw {last:?}");
    }

    /// An attribute of every element matching `css`, in document order. A page that renders
    /// again between the find and the reads makes the elements stale: then they are found again
    /// (a few times at most), rather than failing on a page that is still settling.
    pub async fn attribute_values(&self, css: &str, name: &str) -> Vec<String> {
        let mut tries = 0;
        'find: loop {
            tries += 1;
            let mut values = Vec::new();
            for element in self.client.find_all(Locator::Css(css)).await.unwrap() {
                match element.attr(name).await {
                    Ok(value) => values.extend(value),
                    Err(error)
                        if tries < 10 && format!("{error:?}").contains("StaleElementReference") =>
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue 'find;
                    }
                    Err(error) => panic!("{css} [{name}]: {error:?}"),
                }
            }
            return values;
        }
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // After close() this finds the driver gone; after a panic it stops the driver (and with
        // it the browser).
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}
