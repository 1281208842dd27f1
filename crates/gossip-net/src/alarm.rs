//! The driver's one timer: a Linux timerfd armed for the engine's next deadline.
//!
//! Why not a tokio `Sleep`: tokio's timer wheel keeps a deadline more than 64 ms away in a
//! coarser level and wakes the thread at that level's slot boundary to move it down, so each
//! such deadline (all of them under the `lan` profile: a gossip tick every 200 ms, a probe
//! every second) costs two wake-ups instead of one; and moving a sleep earlier than the one
//! the runtime is parked on makes tokio write to its wake-up eventfd and poll once more. A
//! timerfd fires once, at the time it was set to, and re-arming it is one system call.
//! Wake-ups are most of what an idle speaker costs (see bench/soak/cpu.py).

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// `TimerFd` as tokio's reactor wants it (it asks for `AsRawFd`).
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A one-shot timer on the monotonic clock (the clock of `std::time::Instant`).
pub(crate) struct Alarm {
    fd: AsyncFd<Fd>,
    armed: Option<Instant>,
}

impl Alarm {
    /// A disarmed alarm, registered with the current tokio runtime's reactor.
    pub(crate) fn new() -> io::Result<Self> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        // Tokio deprecated its safe constructors because a generic `AsRawFd` may close or
        // swap its descriptor while registered. `Fd` owns its timerfd outright and is only
        // dropped by the `AsyncFd`, after it has deregistered the descriptor.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(Fd(fd), Interest::READABLE)?;
        Ok(Self { fd, armed: None })
    }

    /// Arms the alarm for `at` (a time already past fires at once), or disarms it. Nothing
    /// to do if it is already set so.
    pub(crate) fn set(&mut self, at: Option<Instant>) -> io::Result<()> {
        if at == self.armed {
            return Ok(());
        }
        let timer = &self.fd.get_ref().0;
        match at {
            None => timer.unset(),
            Some(at) => {
                // Relative, since an Instant's raw clock value is not public; a zero value
                // would disarm the timer, so a deadline already due gets a nanosecond.
                let wait = at
                    .saturating_duration_since(Instant::now())
                    .max(std::time::Duration::from_nanos(1));
                timer.set(
                    Expiration::OneShot(TimeSpec::from_duration(wait)),
                    TimerSetTimeFlags::empty(),
                )
            }
        }
        .map_err(io::Error::from)?;
        self.armed = at;
        Ok(())
    }

    /// Resolves when the armed time has come (never while disarmed). Cancel-safe.
    pub(crate) async fn fired(&mut self) -> io::Result<()> {
        loop {
            let mut ready = self.fd.readable().await?;
            // Reading takes the expiration count and makes the timerfd unreadable again.
            match ready.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from)) {
                Ok(result) => {
                    // The count was read whole, so the next read would block: say so now
                    // rather than learn it from one more read after the next wake-up.
                    ready.clear_ready();
                    self.armed = None;
                    return result;
                }
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Asserts that the alarm does not fire within `ms` milliseconds.
    async fn stays_quiet(alarm: &mut Alarm, ms: u64, why: &str) {
        let waited = tokio::time::timeout(Duration::from_millis(ms), alarm.fired()).await;
        assert!(waited.is_err(), "{why}");
    }

    #[tokio::test]
    async fn fires_not_before_its_time_and_only_when_armed() {
        let mut alarm = Alarm::new().unwrap();
        // Disarmed: never fires.
        stays_quiet(&mut alarm, 30, "a disarmed alarm fired").await;

        // Armed, then moved later: fires at the later time, once.
        let start = Instant::now();
        alarm.set(Some(start + Duration::from_millis(5))).unwrap();
        alarm.set(Some(start + Duration::from_millis(40))).unwrap();
        alarm.fired().await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(40));
        stays_quiet(&mut alarm, 30, "a one-shot alarm fired twice").await;

        // Moved earlier, and a time already past: fires at once.
        let start = Instant::now();
        alarm.set(Some(start + Duration::from_secs(3600))).unwrap();
        alarm.set(Some(start + Duration::from_millis(10))).unwrap();
        alarm.fired().await.unwrap();
        assert!(start.elapsed() >= Duration::from_millis(10));
        alarm.set(Some(start)).unwrap();
        alarm.fired().await.unwrap();

        // Disarmed after arming: does not fire.
        alarm
            .set(Some(Instant::now() + Duration::from_millis(10)))
            .unwrap();
        alarm.set(None).unwrap();
        stays_quiet(&mut alarm, 40, "a disarmed alarm fired").await;
    }
}
