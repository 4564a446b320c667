#!/usr/bin/env bash
# run.sh TARGET PKG TIME: one short fuzzing run (make test-fuzz).
#
# Go's fuzzing coordinator sometimes ends a run that found nothing with
# "context deadline exceeded" when the time is up while a worker is still
# busy with an input; that run is retried once. A real failure (a crash or
# a failing input, which Go writes under testdata/fuzz/) is never retried.
set -uo pipefail
target="$1" pkg="$2" time="$3"
go="${GO:-go}"
for attempt in 1 2; do
  out="$("$go" test -run=NONE -fuzz="^${target}\$" -fuzztime="$time" "$pkg" 2>&1)"
  rc=$?
  printf '%s\n' "$out"
  [ $rc -eq 0 ] && exit 0
  if [ $attempt -eq 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
    echo "run.sh: $target: the fuzzing coordinator timed out waiting for a worker (no failing input); running it once more" >&2
    continue
  fi
  exit $rc
done
