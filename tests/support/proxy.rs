//! A TCP proxy in front of the database whose link can fail, for one test (or one scheduler)
//! only: `cut` drops every open connection and refuses new ones until `restore`; `stall`
//! keeps every connection open (and accepts new ones) but forwards no byte until `resume`,
//! as a network partition that neither side notices looks. Shared by the test binaries
//! through `#[path]`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

pub struct CutProxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// `true` while stalled; every pump waits for `false` before it reads and before it
    /// writes.
    stalled: watch::Sender<bool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl CutProxy {
    /// A proxy in front of the server of the database `url`
    /// (`mysql://user@host:port/name`), and the same url through it.
    pub async fn in_front_of(url: &str) -> (Self, String) {
        let (server, name) = url.rsplit_once('/').expect("a database url");
        let server = server.trim_end_matches('/');
        let (user, upstream) = server.rsplit_once('@').expect("a user in the database url");
        let proxy = Self::start(upstream.to_string()).await;
        let via = format!("{user}@127.0.0.1:{}/{name}", proxy.port);
        (proxy, via)
    }

    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let (stalled, _) = watch::channel(false);
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (c, l, s) = (cut.clone(), links.clone(), stalled.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                if c.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let (upstream, flow) = (upstream.clone(), s.subscribe());
                let task = tokio::spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&upstream).await {
                        let (ri, wi) = inbound.into_split();
                        let (ro, wo) = outbound.into_split();
                        // Either direction ending ends the link.
                        tokio::select! {
                            _ = pump(ri, wo, flow.clone()) => {}
                            _ = pump(ro, wi, flow) => {}
                        }
                    }
                });
                let mut links = l.lock().unwrap();
                links.retain(|t| !t.is_finished());
                links.push(task.abort_handle());
            }
        })
        .abort_handle();
        Self {
            port,
            cut,
            stalled,
            links,
            accept,
        }
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Stops forwarding bytes in both directions on every connection, open or new; nothing
    /// is closed.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again what was held back, and everything after.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

/// Copies `from` to `to` while the link flows, until either side closes.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
        self.resume();
    }
}
