#!/usr/bin/env bash
# Waits for a run_queue.sh worker (its PID) to leave its emptied, closed queue.txt, then runs run_queue2.sh
# in its place on queue2.txt. Usage: switch_queue.sh PID WORKER
cd "$(dirname "$0")"
while kill -0 "$1" 2>/dev/null; do sleep 10; done
exec ./run_queue2.sh "$2" queue2
