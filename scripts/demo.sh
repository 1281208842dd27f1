#!/usr/bin/env bash
# The old name of the failover demo: now `vigil lab`, run through scripts/lab.sh.
exec bash "$(dirname "$0")/lab.sh" "$@"
