#!/bin/bash
# Runs libFuzzer harnesses, each for SECONDS on a scratch copy of its seed corpus
# (tests/fuzz/corpus/NAME/, never written), one line each:
#   ok - fuzz_record: 41234 runs in 3 s (13744 exec/s), corpus 12 -> 57
#   not ok - fuzz_record: crashed; input kept in build-fuzz/artifacts/fuzz_record/
# Usage: tests/fuzz/run.sh SECONDS FUZZER...       exit 1 when any failed
# Crash inputs go to $FUZZ_ARTIFACTS/NAME/ (default: ../artifacts beside each binary).
set -u
seconds=${1:?usage: tests/fuzz/run.sh SECONDS FUZZER...}
shift
src=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sbx-fuzz-run.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=0

for bin in "$@"; do
	name=$(basename "$bin")
	bin=$(realpath "$bin")
	arts=${FUZZ_ARTIFACTS:-$(dirname "$(dirname "$bin")")/artifacts}/$name
	mkdir -p "$scratch/$name/corpus" "$scratch/$name/tmp" "$arts"
	[ -d "$src/corpus/$name" ] && cp -r "$src/corpus/$name/." "$scratch/$name/corpus/"
	before=$(find "$scratch/$name/corpus" -type f | wc -l)
	log=$scratch/$name/log
	# leaks are not looked for (the sanitizer build of sbx does not either); a slow input
	# (10 s) or 2 GiB of memory counts as a failure
	(cd "$scratch/$name" && TMPDIR=$scratch/$name/tmp \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout -k 10 $((seconds + 120)) \
		"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -detect_leaks=0 \
		-print_final_stats=1 -artifact_prefix="$arts/" corpus) >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	after=$(find "$scratch/$name/corpus" -type f | wc -l)
	if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
		echo "ok - $name: $runs runs in $seconds s (${rate:-?} exec/s), corpus $before -> $after"
	else
		echo "not ok - $name: exit status $rc; input kept in $arts/"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|fuzz: |.*runtime error)' "$log" | head -n 8 | sed 's/^/#   /'
		tail -n 5 "$log" | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
done
[ "$failed" -eq 0 ]
