#!/usr/bin/env bash
# Waits for a queue worker (its PID) to leave its emptied, closed queue, then runs SCRIPT in its place on
# QUEUE: run_queue2.sh on queue2 after run_queue.sh, run_queue3.sh on queue3 after run_queue2.sh.
# Usage: switch_queue.sh PID WORKER SCRIPT QUEUE
cd "$(dirname "$0")"
while kill -0 "$1" 2>/dev/null; do sleep 10; done
exec "./$3" "$2" "$4"
