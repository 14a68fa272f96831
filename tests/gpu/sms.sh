#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/sms.sh: the active thread percentage on a GPU, side by side
# natively (no limit there), under NVIDIA MPS and under openmps:
#   - the SM count a client reads and the SMs its kernels ran on (%smid of
#     every block), at 100, 50, 25 and 12.5%;
#   - a full-GPU spin grid (blocks of 1024 threads, several waves): its time
#     at each percentage against the same column at 100%;
#   - two clients at 50% at once against one alone (disjoint SMs: no slow-down);
#   - a connected client moved from 100% to 25% (openmps: live change);
#   - an SM partition (openmps): its client on exactly its SMs, disjoint
#     from an unpartitioned client's, and not slowed by a flood outside it;
#   - virtual devices (openmps): the GPU split in two, a client on a slice
#     by its UUID (its SMs, memory, PyTorch's view), both slices busy;
#   - PyTorch at 100% and 25% (tests/gpu/torch_share.py: its SM count,
#     checked matmuls and a CUDA graph, a bf16 matmul's time).
# Prints one PASS/FAIL line per openmps check and a table; exits 0 when
# every check passed. Run after `make all check-build` (c_client, the
# test kernels' PTX).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PYTHON=${PYTHON:-python3}
rc=0
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script sms
C=$ROOT/$BUILD/tests/system/c_client
check() { if [ "$1" = ok ]; then printf 'PASS  %s\n' "$2"; else printf 'FAIL  %s\n' "$2"; rc=1; fi; }

N=$(native "$C" init sms | awk '/^sms/ { print $3 }')
[ -n "$N" ] && [ "$N" -gt 0 ] || { echo "no GPU answers"; exit 1; }
B=$((N * 8))               # 4 waves of 2 blocks of 1024 threads per SM
CYC=${SMS_CYCLES:-2000000}  # about 1 ms per wave
echo "device: $N SMs; spin grid $B blocks x 1024 threads x $CYC cycles"
start_mps || true
start_openmps || exit 1

# row MODE PCT: "sms used graph-used ms" of one client at PCT: the SM count
# it reads, the SMs its kernels and a graph it captured ran on, the time of
# the second of two spin grids.
row() {
	local out
	out=$($1 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="$2" "$C" init sms "smids:$((N * 8))" "gsmids:$((N * 8))" \
		"spin:$B:1024:$CYC" "spin:$B:1024:$CYC" 2>&1)
	printf '%s %s %s %s\n' "$(echo "$out" | awk '/^sms/ { print $3 }')" \
		"$(echo "$out" | awk '/^smids/ { print $3 }')" "$(echo "$out" | awk '/^gsmids/ { print $3 }')" \
		"$(echo "$out" | awk '/^spin/ { v = $3 } END { print v }')"
}
declare -A base
printf '%-8s %-6s %-6s %-6s %-6s %-10s %-6s\n' column pct sms used graph "spin ms" "x 100%"
for mode in native under_mps under_openmps; do
	[ $mode = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	for pct in 100 50 25 12.5; do
		[ $mode = native ] && [ $pct != 100 ] && continue
		read -r sms used gused ms <<<"$(row $mode $pct)"
		[ $pct = 100 ] && base[$mode]=$ms
		ratio=$(awk -v a="$ms" -v b="${base[$mode]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
		printf '%-8s %-6s %-6s %-6s %-6s %-10s %-6s\n' "${mode#under_}" "$pct" "$sms" "$used" "$gused" "$ms" "$ratio"
		if [ $mode = under_openmps ]; then
			want=$(awk -v n="$N" -v p="$pct" 'BEGIN { k = int(n * p / 100 / 8 + 0.5); if (k < 1) k = 1;
				if (p >= 100 || k * 8 >= n) print n; else print k * 8 }')
			[ "$sms" = "$want" ] && [ "$used" = "$want" ] && [ "$gused" = "$want" ] &&
				check ok "openmps at $pct%: $sms SMs seen, kernels on $used, a graph on $gused" ||
				check no "openmps at $pct%: $sms SMs seen, kernels on $used, a graph on $gused, want $want"
		fi
	done
done

# Two clients at 50% at once, against one alone.
for mode in under_mps under_openmps; do
	[ $mode = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	alone=$(row $mode 50 | awk '{ print $4 }')
	$mode env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" \
		"spin:$B:1024:$CYC" >"$WORK/pa" 2>&1 &
	$mode env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" \
		"spin:$B:1024:$CYC" >"$WORK/pb" 2>&1
	wait
	both=$(cat "$WORK/pa" "$WORK/pb" | awk '/^spin/ { n++; if (n % 3 == 2) s += $3 } END { if (n) printf "%.3f", s / 2 }')
	printf '%-8s two clients at 50%% at once: %s ms each, alone %s ms: %sx\n' "${mode#under_}" "$both" "$alone" \
		"$(awk -v a="$both" -v b="$alone" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
done

# A connected client moved from 100% to 25%.
under_openmps "$C" init "spin:$B:1024:$CYC" \
	"spin:$B:1024:$CYC" "wait:$WORK/go" sms "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" >"$WORK/live" 2>&1 &
pid=$!
for _ in $(seq 1 100); do grep -q '^waiting' "$WORK/live" && break; sleep 0.1; done
echo "set_client_active_thread_percentage $pid 25" | om_ctl
for _ in $(seq 1 100); do grep -q "client $pid: active thread percentage 25.0" "$WORK/om-log/server.log" && break; sleep 0.1; done
touch "$WORK/go"
wait
before=$(awk '/^spin/ { n++; if (n == 2) print $3 }' "$WORK/live")
after=$(awk '/^spin/ { n++; if (n == 4) print $3 }' "$WORK/live")
sms=$(awk '/^sms/ { print $3 }' "$WORK/live")
printf 'openmps live change 100%% -> 25%%: %s SMs, spin %s -> %s ms\n' "$sms" "$before" "$after"
awk -v a="$after" -v b="$before" 'BEGIN { exit !(b > 0 && a / b > 2.5) }' && [ "$sms" = "$(( (N * 25 / 100 + 4) / 8 * 8 ))" ] &&
	check ok "openmps live change to 25%" || check no "openmps live change to 25% (sms $sms, $before -> $after ms)"

# SM partitions (openmps): a client in a partition of 32 SMs runs on
# exactly those, an unpartitioned one on the rest, and their spin grids do
# not slow each other down.
echo "sm_partition add p32 0 32" | om_ctl >/dev/null
for _ in $(seq 1 50); do grep -q "SM partition p32" "$WORK/om-log/server.log" && break; sleep 0.1; done
under_openmps env CUDA_MPS_SM_PARTITION=p32 "$C" init sms "smids:$((N * 8))" >"$WORK/pin" 2>&1
under_openmps "$C" init sms "smids:$((N * 8))" >"$WORK/pout" 2>&1
pin=$(awk '/^smids/ { print $6 }' "$WORK/pin" | tr ',' '\n' | sort)
pout=$(awk '/^smids/ { print $6 }' "$WORK/pout" | tr ',' '\n' | sort)
common=$(comm -12 <(echo "$pin") <(echo "$pout") | wc -l)
in_n=$(awk '/^smids/ { print $3 }' "$WORK/pin"); out_n=$(awk '/^smids/ { print $3 }' "$WORK/pout")
echo "openmps partition p32: inside reads $(awk '/^sms/ { print $3 }' "$WORK/pin") SMs, ran on $in_n; outside ran on $out_n; $common in common"
[ "$in_n" = 32 ] && [ "$common" = 0 ] && [ "$out_n" -gt 0 ] && check ok "openmps partition: 32 SMs, disjoint" ||
	check no "openmps partition: inside $in_n, outside $out_n, $common in common"
inside_alone=$(under_openmps env CUDA_MPS_SM_PARTITION=p32 "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" |
	awk '/^spin/ { v = $3 } END { print v }')
under_openmps "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" \
	"spin:$B:1024:$CYC" "spin:$B:1024:$CYC" >"$WORK/pflood" 2>&1 &
sleep 0.05
inside_busy=$(under_openmps env CUDA_MPS_SM_PARTITION=p32 "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" |
	awk '/^spin/ { v = $3 } END { print v }')
wait
printf 'openmps partition p32: spin grid alone %s ms, beside a flood outside it %s ms (%sx)\n' "$inside_alone" \
	"$inside_busy" "$(awk -v a="$inside_busy" -v b="$inside_alone" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
echo "sm_partition rm p32" | om_ctl >/dev/null

# Virtual devices (openmps): the GPU split in two, each slice selected by
# its UUID as a container selects a GPU.
om_ctl <<<"vdevice split 0 2" >"$WORK/vd"
u0=$(awk '$1 == "vgpu0-0" { print $2 }' "$WORK/vd"); u1=$(awk '$1 == "vgpu0-1" { print $2 }' "$WORK/vd")
total=$(native "$C" init meminfo | awk '/^meminfo/ { print $4 }')
under_openmps env CUDA_VISIBLE_DEVICES="$u0" "$C" list init sms meminfo "smids:$((N * 8))" >"$WORK/vd0" 2>&1
under_openmps env CUDA_VISIBLE_DEVICES="$u1" "$C" init sms "smids:$((N * 8))" >"$WORK/vd1" 2>&1
vsms=$(awk '/^sms/ { print $3 }' "$WORK/vd0"); vused=$(awk '/^smids/ { print $3 }' "$WORK/vd0")
vmem=$(awk '/^meminfo/ { print $4 }' "$WORK/vd0"); vuuid=$(awk '/^list/ { print $3 " " $4 }' "$WORK/vd0")
common=$(comm -12 <(awk '/^smids/ { print $6 }' "$WORK/vd0" | tr ',' '\n' | sort) \
	<(awk '/^smids/ { print $6 }' "$WORK/vd1" | tr ',' '\n' | sort) | wc -l)
echo "openmps vdevice $u0: sees [$vuuid], $vsms SMs, ran on $vused, $vmem of $total bytes; $common SMs in common with $u1"
want_uuid="1 $(echo "$u0" | sed 's/^GPU-//; s/-//g')"
[ "$vuuid" = "$want_uuid" ] && [ "$vsms" = "$vused" ] && [ "$vsms" -le $((N / 2)) ] && [ "$common" = 0 ] &&
	[ "$vmem" = $((total / 2)) ] && check ok "openmps virtual device: its UUID, SMs and memory" ||
	check no "openmps virtual device ($vuuid, $vsms/$vused SMs, $vmem bytes, $common shared)"
# Both slices at once, each as fast as alone.
va=$(under_openmps env CUDA_VISIBLE_DEVICES="$u0" "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" |
	awk '/^spin/ { v = $3 } END { print v }')
under_openmps env CUDA_VISIBLE_DEVICES="$u1" "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" \
	"spin:$B:1024:$CYC" >"$WORK/vdb" 2>&1 &
vb=$(under_openmps env CUDA_VISIBLE_DEVICES="$u0" "$C" init "spin:$B:1024:$CYC" "spin:$B:1024:$CYC" |
	awk '/^spin/ { v = $3 } END { print v }')
wait
printf 'openmps vdevice: spin grid on one slice alone %s ms, beside the other slice busy %s ms\n' "$va" "$vb"
# PyTorch counts devices through NVML by CUDA_VISIBLE_DEVICES: the slice
# goes in OPENMPS_VISIBLE_DEVICES, which openmps reads first.
line=$(under_openmps env CUDA_VISIBLE_DEVICES=0 OPENMPS_VISIBLE_DEVICES="$u0" "$PYTHON" -c "import torch; p = torch.cuda.get_device_properties(0);
x = torch.randn(2048, 2048, device='cuda'); ok = torch.allclose((x @ x).cpu(), x.cpu() @ x.cpu(), rtol=1e-3, atol=1e-2);
print('torch', torch.cuda.device_count(), p.multi_processor_count, p.total_memory, ok)" 2>&1 | tail -1)
echo "openmps vdevice under PyTorch: $line (device count, SMs, memory, matmul ok)"
case "$line" in "torch 1 $vsms $vmem True") check ok "openmps virtual device under PyTorch" ;;
	*) check no "openmps virtual device under PyTorch: $line" ;; esac
om_ctl <<<"vdevice rm vgpu0-0" >/dev/null; om_ctl <<<"vdevice rm vgpu0-1" >/dev/null

# PyTorch at 100% and 25%.
for mode in native under_mps under_openmps; do
	[ $mode = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	for pct in 100 25; do
		[ $mode = native ] && [ $pct != 100 ] && continue
		line=$($mode env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$pct "$PYTHON" tests/gpu/torch_share.py 2>&1 | tail -1)
		printf '%-8s torch at %s%%: %s\n' "${mode#under_}" "$pct" "$line"
		if [ $mode = under_openmps ]; then
			case "$line" in *" ok") check ok "openmps torch at $pct%" ;; *) check no "openmps torch at $pct%: $line" ;; esac
		fi
	done
done
grep -E "SMs|green|share" "$WORK/om-log/server.log" | tail -12 | sed 's/^/  server.log: /'
exit $rc
