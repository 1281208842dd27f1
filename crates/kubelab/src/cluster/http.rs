//! Plain HTTP GETs from inside a lab namespace: the speakers' `/metrics` and `/status`, the
//! programs' probe paths. HTTP/1.0, so the answer is never chunked and ends when the server
//! closes the connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a connection and each read may take.
const LIMIT: Duration = Duration::from_secs(5);

/// An HTTP answer: the status code and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// Everything after the head.
    pub body: String,
}

/// `GET path` at `addr` from a thread inside lab namespace `ns` (5 s to connect, 5 s per
/// read).
pub fn http_get(ns: &str, addr: SocketAddr, path: &str) -> io::Result<HttpAnswer> {
    vigil_netlab::netns::run_in(ns, || get(addr, path))?
}

fn get(addr: SocketAddr, path: &str) -> io::Result<HttpAnswer> {
    let mut stream = TcpStream::connect_timeout(&addr, LIMIT)?;
    stream.set_read_timeout(Some(LIMIT))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    parse(&text)
        .ok_or_else(|| io::Error::other(format!("GET {path} at {addr}: no HTTP answer: {text:?}")))
}

/// The status code and body of a whole HTTP answer (`None`: not one).
fn parse(text: &str) -> Option<HttpAnswer> {
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .strip_prefix("HTTP/1.")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(HttpAnswer {
        status,
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_split_into_status_and_body_and_junk_is_none() {
        let answer = parse("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\na 1").unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, "a 1");
        assert_eq!(parse("HTTP/1.0 404 Not Found\r\n\r\n").unwrap().status, 404);
        assert_eq!(parse("SSH-2.0-x\r\n\r\n"), None);
        assert_eq!(parse("HTTP/1.1 200 OK\r\n"), None);
    }
}
