#!/usr/bin/env bash
# Everything the GPU machine runs for a submission, in two device calls (run both within one
# lease so the build is reused):
#   phase1  build (library, GPU tier, bench, Python extension, doctor probe) in one CMake build;
#           the GPU tier (tests/gpu/run.sh), the Python GPU tests, the doctor in local and
#           group mode with masked and permuted devices
#   phase2  the benchmark matrix (scripts/bench_gpu.sh: actors eager/graph/permute against NCCL,
#           torchrun NCCL; reduce_scatter, all_gather and broadcast actors eager/graph), the Python 4 KB latency against the C++ figure, the NCCL path
#           (scripts/nccl_path_gpu.sh: two virtual nodes, every collective checked), the actor sweep
#           example (process launcher with actor traits: the device machine has no Ray), then
#           4, 3 and 8 ranks on the 2 GPUs (tests/gpu/shared.sh: the 3-8 rank kernel paths)
#   nccl    (one call, for changes to the NCCL path only) build, the NCCL setup tests
#           (tests/python/test_gpu_nccl_setup.py) and the NCCL path (scripts/nccl_path_gpu.sh)
# Results come back as $OUT/<phase>.tgz (logs, JSON, PNG) and $OUT/<phase>-summary.txt.
set -u
phase=${1:?usage: device_all.sh phase1|phase2|nccl}
RUN=$phase
source "$(dirname "$0")/device_steps.sh"
export PYTHONPATH=$B/python/pkg
build() {
  step build 400 bash -c "cmake -S . -B '$B' -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORCC_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DACTORCC_TESTS=ON -DACTORCC_TOOLS=ON -DACTORCC_PYTHON=ON && \
      cmake --build '$B' -j$(nproc)" || { tail -40 "$W/build.log"; exit 1; }
}
nccl_path() {
  step nccl-path 400 env OUT="$W/nccl-path" BENCH="$B/tools/bench/actorcc-bench" bash scripts/nccl_path_gpu.sh
  tail -14 "$W/nccl-path.log"
}

if [ "$phase" = nccl ]; then
  build
  step py-nccl-setup 240 python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_nccl_setup.py
  tail -25 "$W/py-nccl-setup.log"
  nccl_path
elif [ "$phase" = phase1 ]; then
  nvidia-smi topo -m >"$W/topo.txt" 2>&1
  build
  step gpu-tier 300 env OUT="$W/gpu" ACTORCC_GPU_BUILD="$B" ACTORCC_GPU_PREBUILT=1 ACTORCC_GPU_BUDGET=280 bash tests/gpu/run.sh
  tail -40 "$W/gpu-tier.log"
  step py-gpu 240 python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_torch.py \
      tests/python/test_gpu_nccl_setup.py tests/python/test_basics.py
  tail -25 "$W/py-gpu.log"
  # send/recv, all_to_all(_v), reduce, gather, scatter on GPUs (ranks sharing GPU 0; one GPU
  # each; the NCCL path) and the torch.distributed backend's CPU matrix and DDP
  step py-gpu-p2p 420 python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_p2p.py \
      tests/python/test_torch_backend.py
  tail -25 "$W/py-gpu-p2p.log"
  step doctor-local-masked 120 env CUDA_VISIBLE_DEVICES=1 python3 -m actorcc.doctor --torch
  step doctor-local-permuted 120 env CUDA_VISIBLE_DEVICES=1,0 python3 -m actorcc.doctor --torch
  CUDA_VISIBLE_DEVICES=1 python3 -m actorcc.doctor --json >"$W/doctor-local-masked.json" 2>&1
  for mode in masked permuted; do
    if [ $mode = masked ]; then d0=0 d1=1; else d0=1 d1=0; fi
    port=$((29600 + RANDOM % 300))
    CUDA_VISIBLE_DEVICES=$d1 timeout 180 python3 -m actorcc.doctor --address 127.0.0.1:$port --rank 1 --world 2 \
      >"$W/doctor-group-$mode-rank1.txt" 2>&1 &
    step doctor-group-$mode 180 env CUDA_VISIBLE_DEVICES=$d0 python3 -m actorcc.doctor --address 127.0.0.1:$port --rank 0 --world 2
    wait
  done
  # The doctor's cross-rank check: NCCL_ALGO reaching one worker only.
  port=$((29600 + RANDOM % 300))
  CUDA_VISIBLE_DEVICES=1 NCCL_ALGO=Ring timeout 180 python3 -m actorcc.doctor --address 127.0.0.1:$port --rank 1 \
    --world 2 --no-bandwidth >"$W/doctor-group-envmismatch-rank1.txt" 2>&1 &
  step doctor-group-envmismatch 180 env CUDA_VISIBLE_DEVICES=0 python3 -m actorcc.doctor --address 127.0.0.1:$port \
    --rank 0 --world 2 --no-bandwidth
  wait
  head -30 "$W/doctor-group-masked.log"
else
  BENCH=$B/tools/bench/actorcc-bench
  step bench 480 env OUT="$W/bench" BENCH="$BENCH" COLLS="reduce_scatter all_gather broadcast" bash scripts/bench_gpu.sh
  grep -h -A14 "comparison\|ratio" "$W/bench.log" | head -60
  step py-latency 120 python3 scripts/py_latency.py --world 2 --bench "$BENCH" --json "$W/py_latency.json"
  tail -8 "$W/py-latency.log"
  nccl_path
  step example-sweep 240 python3 examples/ray_allreduce_sweep.py --no-ray --world 2 --stagger 1 --json "$W/example.json"
  tail -25 "$W/example-sweep.log"
  # last, so that nothing else shares the GPUs with it: 4, 3 and 8 ranks on the 2 GPUs
  step gpu-shared 430 env OUT="$W/gpu-shared" ACTORCC_GPU_BUILD="$B" ACTORCC_GPU_PREBUILT=1 bash tests/gpu/shared.sh 420
  tail -8 "$W/gpu-shared.log"
fi
echo "== summary ($phase)"
cat "$SUMMARY"
pack
