//! `poll(2)` over a handful of descriptors: the driver's only way of waiting.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Waits until one of `fds` is readable (or has an error or hang-up pending), or `timeout`
/// passes. Returns one flag per descriptor, in order. An interrupted wait returns all false.
pub fn wait(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // Round up so that a deadline 0.3 ms away does not spin.
    let millis = timeout.as_micros().div_ceil(1000);
    let millis = libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pollfds` is a valid array of `pollfds.len()` initialised entries, alive for the
    // whole call; the descriptors are borrowed, so they stay open.
    let ret = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, millis) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(err);
    }
    Ok(pollfds.iter().map(|p| p.revents != 0).collect())
}
