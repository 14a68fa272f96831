#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A job script written for NVIDIA MPS, as people write them (start the daemon
# with -d, set the defaults, run the job, list the servers and clients,
# quit, wait for the daemon to go), run against openmps with nothing changed
# but the program's name: nvidia-cuda-mps-control -> openmps-control (which
# also renames nvidia-cuda-mps-control.pid to openmps-control.pid).
#
#   usage: control_mps_script.sh BUILD_DIR

name=control_mps_script; . "$(dirname "$0")/c_lib.sh"

cat >"$dir/job-for-nvidia-mps.sh" <<'EOF'
#!/bin/sh
# Start MPS for this job, limit each process, run, report, stop.
set -e
export CUDA_MPS_PIPE_DIRECTORY="$JOB_DIR/mps-pipe"
export CUDA_MPS_LOG_DIRECTORY="$JOB_DIR/mps-log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"

nvidia-cuda-mps-control -d
echo set_default_active_thread_percentage 50 | nvidia-cuda-mps-control
echo "set_default_device_pinned_mem_limit 0 512M" | nvidia-cuda-mps-control
pct=$(echo get_default_active_thread_percentage | nvidia-cuda-mps-control)
lim=$(echo get_default_device_pinned_mem_limit 0 | nvidia-cuda-mps-control)
echo "MPS up: $pct% threads, $lim per process"

# The job: two processes sharing the GPU.
$JOB_APP init alloc:256 "wait:$JOB_DIR/go" sync > "$JOB_DIR/p1.out" &
p1=$!
$JOB_APP init alloc:600 "wait:$JOB_DIR/go" sync > "$JOB_DIR/p2.out" &
p2=$!
while [ "$(echo get_server_list | nvidia-cuda-mps-control)" = "" ]; do sleep 0.1; done
server=$(echo get_server_list | nvidia-cuda-mps-control)
while [ "$(echo get_client_list $server | nvidia-cuda-mps-control | wc -l)" -lt 2 ]; do sleep 0.1; done
echo "server $server status $(echo get_server_status $server | nvidia-cuda-mps-control)"
echo "clients: $(echo get_client_list $server | nvidia-cuda-mps-control | tr '\n' ' ')"
echo ps | nvidia-cuda-mps-control
touch "$JOB_DIR/go"
wait $p1 $p2

echo quit | nvidia-cuda-mps-control
while [ -e "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid" ]; do sleep 0.1; done
echo "MPS down"
EOF

sed 's/nvidia-cuda-mps-control/openmps-control/g' "$dir/job-for-nvidia-mps.sh" >"$dir/job.sh"
sed 's/openmps-control/nvidia-cuda-mps-control/g' "$dir/job.sh" | cmp -s - "$dir/job-for-nvidia-mps.sh" &&
	! grep -q nvidia "$dir/job.sh" || fail "the script changed in more than the program's name"
out=$(JOB_DIR="$dir" JOB_APP="env LD_LIBRARY_PATH=$build/lib $build/tests/system/c_client" \
	PATH="$build/bin:$PATH" timeout 60 sh "$dir/job.sh" 2>&1); st=$?
[ $st -eq 0 ] || fail "the MPS job script failed (exit $st): $out"
echo "$out" | grep -q "^MPS up: 50.0% threads, 512M per process$" || fail "settings: $out"
echo "$out" | grep -Eq "^server [0-9]+ status ACTIVE$" || fail "server status: $out"
echo "$out" | grep -Eq "^clients: [0-9]+ [0-9]+ $" || fail "client list: $out"
echo "$out" | grep -Eq "^PID +ID +SERVER +DEVICE +NAMESPACE +COMMAND$" || fail "ps header: $out"
[ "$(echo "$out" | grep -c "c_client init alloc")" -eq 2 ] || fail "ps rows: $out"
echo "$out" | grep -q "^MPS down$" || fail "the daemon did not go: $out"
grep -q "^alloc 256 CUDA_SUCCESS$" "$dir/p1.out" && grep -q "^sync CUDA_SUCCESS$" "$dir/p1.out" ||
	fail "the first process failed: $(cat "$dir/p1.out")"
grep -q "^alloc 600 CUDA_ERROR_OUT_OF_MEMORY$" "$dir/p2.out" ||
	fail "the 512M limit did not reach the second process: $(cat "$dir/p2.out")"
finish
