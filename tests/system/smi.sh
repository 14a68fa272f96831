#!/bin/sh
# SPDX-License-Identifier: MIT
#
# openmps's nvidia-smi (src/smi) through openmps's NVML, as a pod runs it,
# against the stand-in: -L lists every device as CUDA does; --query-gpu
# gives the fields scripts ask for in CSV, with and without header and
# units (utilisation as NVIDIA's program writes it, "0 %"); --query-compute-apps and the summary list a client holding 8 MiB;
# -i picks a device by index or UUID and refuses one that does not exist;
# an option or field it does not answer is refused with status 2, a query
# without --format too.
#
#   usage: smi.sh BUILD_DIR

name=smi; . "$(dirname "$0")/c_lib.sh"
smi="$build/lib/nvml/nvidia-smi"
[ -x "$smi" ] || { fail "no $smi"; finish; }
mkdir -p "$dir/root/sys/module/nvidia"
echo 580.159.04 >"$dir/root/sys/module/nvidia/version"
run_smi() { env OPENMPS_NVML_ROOT="$dir/root" LD_LIBRARY_PATH="$build/lib/nvml:$build/lib" "$smi" "$@"; }

start_daemon
LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list >"$dir/list.out" 2>&1
n=$(awk '/^list CUDA_SUCCESS/ { print $3 }' "$dir/list.out")
uuid0=$(awk '/^list CUDA_SUCCESS/ { print $4 }' "$dir/list.out")

run_smi -L >"$dir/L.out" 2>&1 || fail "-L: $(cat "$dir/L.out")"
[ "$(grep -c '^GPU [0-9]*: openmps stand-in device [0-9]* (UUID: GPU-[0-9a-f-]\{36\})$' "$dir/L.out")" = "$n" ] ||
	fail "-L lists not the $n devices CUDA lists: $(cat "$dir/L.out")"
u=$(sed -n 's/^GPU 0: .*(UUID: \(GPU-[0-9a-f-]*\))$/\1/p' "$dir/L.out")
[ "$(echo "$u" | sed 's/^GPU-//; s/-//g')" = "$uuid0" ] || fail "-L's first UUID $u is not CUDA's $uuid0"

run_smi --query-gpu=index,name,uuid,memory.total,memory.used,driver_version,compute_cap --format=csv \
	>"$dir/q.out" 2>&1 || fail "--query-gpu: $(cat "$dir/q.out")"
[ "$(sed -n 1p "$dir/q.out")" = "index, name, uuid, memory.total [MiB], memory.used [MiB], driver_version, compute_cap" ] ||
	fail "--query-gpu header: $(sed -n 1p "$dir/q.out")"
grep -q "^0, openmps stand-in device 0, $u, 1024 MiB, [0-9]* MiB, 580.159.04, 9.0$" "$dir/q.out" ||
	fail "--query-gpu row: $(sed -n 2p "$dir/q.out")"
[ "$(run_smi --query-gpu=memory.total,count --format=csv,noheader,nounits -i 0)" = "1024, $n" ] ||
	fail "noheader,nounits -i 0: $(run_smi --query-gpu=memory.total,count --format=csv,noheader,nounits -i 0)"
[ "$(run_smi --query-gpu=index --format=csv,noheader -i "$u")" = 0 ] || fail "-i by UUID"
# Utilisation with no work: 0 % (NVML's figure, tests/system/nvml.sh).
[ "$(run_smi --query-gpu=utilization.gpu,utilization.memory --format=csv -i 0)" = "$(printf 'utilization.gpu [%%], utilization.memory [%%]\n0 %%, 0 %%')" ] ||
	fail "utilization: $(run_smi --query-gpu=utilization.gpu,utilization.memory --format=csv -i 0)"
[ "$(run_smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0)" = 0 ] ||
	fail "utilization, nounits: $(run_smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0)"
run_smi -L -i 99 >"$dir/i.out" 2>&1; st=$?
[ $st -eq 6 ] && grep -q "No devices were found matching the identifier 99" "$dir/i.out" ||
	fail "-i 99: exit $st, $(cat "$dir/i.out")"

client A init alloc:8 "wait:$dir/goA"
wait_for "$dir/A.out" "^waiting" || fail "the client was not served"
got=$(run_smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader)
printf '%s\n' "$got" | grep -q "^$(cpid A), 8 MiB, $u$" || fail "--query-compute-apps: $got"
run_smi >"$dir/summary.out" 2>&1 || fail "the summary: $(cat "$dir/summary.out")"
grep -q "^|    0 *$(cpid A)      C          8 MiB" "$dir/summary.out" || fail "the summary's processes: $(cat "$dir/summary.out")"
grep -q "Driver Version: 580.159.04" "$dir/summary.out" || fail "the summary's driver: $(sed -n 2p "$dir/summary.out")"
touch "$dir/goA"
wait "$(cpid A)" || fail "the client failed: $(cat "$dir/A.err")"

for a in "-x" "--query-gpu=name" "--query-gpu=fan.speed --format=csv" "--query-gpu=name --format=xml"; do
	# shellcheck disable=SC2086 # one option or two, split on purpose
	run_smi $a >"$dir/bad.out" 2>&1; st=$?
	[ $st -eq 2 ] && [ -s "$dir/bad.out" ] || fail "'$a': exit $st, '$(cat "$dir/bad.out")'"
done

stop_daemon
finish
