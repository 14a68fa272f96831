#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/detach.sh start NAME COMMAND...
# tests/gpu/detach.sh wait NAME [SECONDS]
#
# Runs a GPU job that outlasts the shell that starts it (the ten-minute
# soak, say, where one command may run for less): `start` copies the
# repository, build included, to /tmp/detached-NAME/tree (so that changes
# to the working tree while it runs cannot reach it), runs COMMAND there in
# a session of its own with its output in /tmp/detached-NAME/log and its
# $OUT in /tmp/detached-NAME/out, and returns at once; `wait` waits up to
# SECONDS (default 570) for it to end, then prints the log's last 200
# lines. Exit status of `wait`: the job's, or 75 if it is still running
# (call `wait` again).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '4,5p' "$0" | sed 's/^# //' >&2; exit 2; }
[ $# -ge 2 ] || usage
verb=$1 name=$2
shift 2
case $name in *[!A-Za-z0-9_-]*|'') echo "detach: NAME is letters, digits, '-' and '_'" >&2; exit 2 ;; esac
dir=/tmp/detached-$name

case $verb in
start)
	[ $# -ge 1 ] || usage
	if [ -e "$dir/running" ]; then echo "detach: $name is running already" >&2; exit 1; fi
	rm -rf "$dir" && mkdir -p "$dir" && cp -a "$ROOT" "$dir/tree" || exit 1
	touch "$dir/running"
	# $1.. are the command and its arguments, run as given in the copy.
	# shellcheck disable=SC2016
	# OUT is the job's own ($dir/out): a device run's \$OUT is emptied at
	# the next command, and what the job writes there must outlive it.
	mkdir -p "$dir/out"
	setsid env OUT="$dir/out" bash -c 'cd "$0/tree" && "${@}" > "$0/log" 2>&1; echo $? > "$0/rc"; rm -f "$0/running"' \
		"$dir" "$@" < /dev/null > /dev/null 2>&1 &
	echo "detach: $name started in $dir/tree (log: $dir/log)"
	;;
wait)
	secs=${1:-570}
	[ -d "$dir" ] || { echo "detach: no job $name" >&2; exit 2; }
	end=$((SECONDS + secs))
	while [ -e "$dir/running" ] && [ $SECONDS -lt $end ]; do sleep 2; done
	tail -n 200 "$dir/log" 2>/dev/null
	if [ -e "$dir/running" ]; then echo "detach: $name still running"; exit 75; fi
	exit "$(cat "$dir/rc" 2>/dev/null || echo 1)"
	;;
*) usage ;;
esac
