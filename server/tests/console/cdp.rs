//! Headless Chromium driven over the DevTools protocol: one page, navigated, read with
//! `Runtime.evaluate` and photographed with `Page.captureScreenshot`. Every wait is bounded.

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long one DevTools call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Browser {
    child: Child,
    page: Ws,
    next_id: u64,
    profile: PathBuf,
}

/// Debian's Chromium, if installed.
pub fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().map(PathBuf::from).find(|p| p.exists())
}

impl Browser {
    /// Starts `binary` headless with a fresh profile and attaches to its first page.
    pub async fn launch(binary: &Path) -> Result<Browser, String> {
        let profile = std::env::temp_dir().join(format!("console-chromium-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let mut child = Command::new(binary)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
            .args(["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--window-size=1280,900"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        // "DevTools listening on ws://127.0.0.1:<port>/devtools/browser/<id>"
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.split("DevTools listening on ").nth(1) {
                    return url.split(':').nth(2).and_then(|p| p.split('/').next()).map(str::to_owned);
                }
            }
            None
        })
        .await
        .map_err(|_| "Chromium did not open its DevTools port in 60 s".to_string())?
        .ok_or("Chromium exited before opening its DevTools port")?;
        // Chromium keeps logging; nobody else reads its stderr.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let targets: Value = serde_json::from_str(&devtools_get(&port, "/json/list").await?)
            .map_err(|e| format!("DevTools /json/list: {e}"))?;
        let url = targets
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .ok_or("no page target")?
            .to_string();
        let (page, _) =
            tokio_tungstenite::connect_async(&url).await.map_err(|e| format!("DevTools WebSocket {url}: {e}"))?;
        let mut browser = Browser { child, page, next_id: 0, profile };
        browser.call("Page.enable", json!({})).await;
        browser.call("Runtime.enable", json!({})).await;
        Ok(browser)
    }

    /// One DevTools call; its `result`. Events that arrive meanwhile are skipped.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"id": id, "method": method, "params": params}).to_string();
        self.page.send(Message::Text(request.into())).await.expect("DevTools connection open");
        let page = &mut self.page;
        let reply = tokio::time::timeout(CALL_TIMEOUT, async {
            loop {
                let Message::Text(text) = page.next().await.expect("DevTools connection open").unwrap() else {
                    continue;
                };
                let message: Value = serde_json::from_str(&text).unwrap();
                if message["id"] == id {
                    return message;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{method} answered in time"));
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    pub async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true, "awaitPromise": true}))
            .await;
        assert!(result.get("exceptionDetails").is_none(), "{expression} threw: {result}");
        result["result"]["value"].clone()
    }

    /// The page's visible text.
    pub async fn text(&mut self) -> String {
        self.eval("document.body ? document.body.innerText : ''").await.as_str().unwrap_or_default().to_string()
    }

    /// Waits until `expression` is true in the page, for at most `limit`.
    pub async fn wait_for(&mut self, expression: &str, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if self.eval(expression).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let text = self.text().await;
        panic!("never true within {limit:?}: {expression}\npage text:\n{text}");
    }

    /// Loads `url` and waits for it to be complete.
    pub async fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for(&format!("location.href === {} && document.readyState === 'complete'", json!(url)), CALL_TIMEOUT)
            .await;
    }

    /// A PNG of the whole page.
    pub async fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let clip = json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1});
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png", "clip": clip, "captureBeyondViewport": true}))
            .await;
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    /// Kills Chromium and removes its profile once it has exited: its helper processes write
    /// into the profile while they die, so a profile removed at once comes back (bounded: 2 s).
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        for _ in 0..100 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for _ in 0..5 {
            let _ = std::fs::remove_dir_all(&self.profile);
            std::thread::sleep(std::time::Duration::from_millis(100));
            if !self.profile.exists() {
                break;
            }
        }
    }
}

/// A GET on the DevTools HTTP endpoint.
async fn devtools_get(port: &str, path: &str) -> Result<String, String> {
    let mut stream =
        tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await.map_err(|e| format!("DevTools port: {e}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    // Chromium keeps the connection open: read the headers, then Content-Length bytes.
    let read = async {
        let mut response = Vec::new();
        let mut chunk = [0u8; 4096];
        while response.len() < 1 << 20 {
            let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            response.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&response);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse::<usize>().ok());
                if length.is_some_and(|length| body.len() >= length) {
                    return Ok(body.to_string());
                }
            }
        }
        Err("DevTools HTTP answer without a complete body".to_string())
    };
    tokio::time::timeout(CALL_TIMEOUT, read).await.map_err(|_| "DevTools HTTP timed out".to_string())?
}
