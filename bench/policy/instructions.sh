#!/usr/bin/env bash
# Instructions per `check` call, counted by callgrind: the difference between
# a run of 1,000 and one of 11,000 calls, divided by 10,000 (so start-up and
# preset compilation cancel out). Usage: instructions.sh <preset> <file|bash> [size]
set -euo pipefail
cd "$(dirname "$0")"
bin=${CARGO_TARGET_DIR:-target}/release/examples/repeat
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" "$3" "$4" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
size=${3:-50}
a=$(count "$1" "$2" "$size" 1000)
b=$(count "$1" "$2" "$size" 11000)
echo "$1 $2 $size: $(( (b - a) / 10000 )) instructions per check"
