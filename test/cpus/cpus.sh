#!/usr/bin/env bash
# The numerics and memory-plan tests under the CPU personalities this
# machine can emulate, each variable on its own (the others unset):
#
#   OPENBLAS_CORETYPE   Haswell, SkylakeX, Prescott    the native engine's BLAS
#   ONEDNN_MAX_CPU_ISA  AVX2, AVX512_CORE,             the torch engine's worker
#                       AVX512_CORE_BF16               and PyTorch's float32
#   GODEBUG             cpu.avx512f=off                the native engine's Go
#                                                      assembly (int8, Adam)
#
# and with nothing set. A personality the CPU cannot run (an ISA it lacks)
# falls back to what it has; the test is still run. Groups of tests:
#
#   native     engine/native: forwards against references, gradient checks,
#              Winograd and depthwise against im2col, int8 kernels, the BLAS
#              split, the executor's memory against the plan
#   twin       bench/torchspec: the DeepLabV3+ twins against PyTorch's float64
#   agree      engine/torch: the worker sees the personality; 3-D, random
#              attention and token ops on both engines
#   nativemem  cmd/pipe: every example's plan against the process's peak
#              (six of them under another BLAS core, see nativemem_blas)
#   torchmem   cmd/pipe: the conv examples' plans against the torch worker's
#              peak (fp32 and bf16; fp32 alone under AVX2, see torchmem_run)
#
# Each test binary is built once; a run prints its time. Every run goes
# to the end, and the script fails if one failed. The whole matrix took
# 15 min on a 2-core AMD EPYC, the fast pair 44 s (links included).
#
#   bash test/cpus/cpus.sh          the whole matrix (make test-cpus)
#   bash test/cpus/cpus.sh fast     two quick runs (make test): the
#                                   DeepLab example twin under Prescott's
#                                   kernels, the native numerics without
#                                   AVX-512 in Go
#
# PIPE_OPENBLAS_AS_LIBRARY is never set: OPENBLAS_CORETYPE is the user's.
set -uo pipefail

mode=${1:-all}
root=$(cd "$(dirname "$0")/../.." && pwd)
GO=${GO:-go}
export PIPE_PYTHON=${PIPE_PYTHON:-/usr/bin/python3} PIPE_REQUIRE_TORCH=1
unset PIPE_OPENBLAS_AS_LIBRARY OPENBLAS_CORETYPE ONEDNN_MAX_CPU_ISA DNNL_MAX_CPU_ISA

native_run='^(TestForwardReference|TestBatchnormReference|TestLossReference|TestLossAfterSigmoid|TestGradients.*|TestMaskedLosses|TestCrossEntropyProbabilities|TestAdamKernels|TestFastMath|TestWinogradMatchesIm2col|TestDepthwiseMatchesGEMM|TestInt8AgreesWithFP32|TestInt8KernelsAgree|TestInt8GemmExact|TestDotAVX2Exact|TestBLASSplitSameSteps|TestMemoryMatchesPlan)$'
numerics_run='^(TestForwardReference|TestBatchnormReference|TestLossReference|TestGradients.*|TestAdamKernels|TestInt8KernelsAgree|TestInt8GemmExact|TestDotAVX2Exact|TestBLASSplitSameSteps)$'
twin_run='^(TestDeepLabTwin|TestDeepLabExampleTwin)$'
agree_run='^(TestWorkerSeesTheCPUPersonality|TestVolumesAgree|TestRandomAttentionAgrees|TestTokenOpsAgree)$'
nativemem_run='^TestPlanTotalIsTheProcessPeak$'
# Under another BLAS core, the examples whose plans are smallest or most
# made of products, where OpenBLAS's buffers weigh most. All 15 took 7
# minutes with nothing set and 10 on Prescott's kernels (2 shared cores),
# and their errors moved by at most 1 point between the two.
nativemem_blas='^TestPlanTotalIsTheProcessPeak$/^(fashion|fashion_mlp|lowrank|panther|pharma|resblock)$'
# The examples whose convs weigh in their plans, in fp32 and bf16: where
# oneDNN's kernels (their blocked copies, their scratchpads) decide memory.
# Under ONEDNN_MAX_CPU_ISA=AVX2 only the fp32 ones: PyTorch 1.13 sends bf16
# convs to oneDNN by cpuinfo's AVX-512 flags, which the variable leaves on,
# and oneDNN, held to AVX2, then refuses them ("could not create a primitive
# descriptor iterator"). No real CPU is in that state: one without AVX-512
# takes the slow path, which TestTorchPlanHoldsOnTheSlowConvPath holds.
torchmem_fp32='fashion|esrgan_landsat|pix2pix_bands|volume_unet'
torchmem_run="^TestTorchPlanTotalIsTheWorkerPeak\$/^($torchmem_fp32|olinda|deeplab_olinda|cells)\$"
torchmem_avx2="^TestTorchPlanTotalIsTheWorkerPeak\$/^($torchmem_fp32)\$"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
declare -A pkg=([native]=engine/native [twin]=bench/torchspec [agree]=engine/torch [nativemem]=cmd/pipe [torchmem]=cmd/pipe)
build() { # build GROUP...: one test binary per package
  for g in "$@"; do
    local p=${pkg[$g]} out=$bin/${pkg[$g]//\//_}.test
    [ -x "$out" ] || (cd "$root" && $GO test -c -o "$out" "./$p") || { echo "cpus: cannot build ./$p" >&2; exit 1; }
  done
}

failed=()
# run GROUP REGEXP ENV...: the group's tests under ENV, in its package's folder.
run() {
  local g=$1 re=$2; shift 2
  local p=${pkg[$g]} label=${*:-nothing set}
  local t0=$SECONDS out
  out=$(cd "$root/$p" && env "$@" "$bin/${p//\//_}.test" -test.run "$re" -test.count=1 -test.timeout 30m 2>&1)
  local rc=$? dt=$((SECONDS - t0))
  if [ $rc -eq 0 ]; then
    printf 'cpus: ok    %-9s %-34s %4ds\n' "$g" "$label" "$dt"
  else
    printf 'cpus: FAIL  %-9s %-34s %4ds\n%s\n' "$g" "$label" "$dt" "$out"
    failed+=("$g under $label")
  fi
}

case $mode in
fast)
  build twin native
  run twin '^TestDeepLabExampleTwin$' OPENBLAS_CORETYPE=Prescott
  run native "$numerics_run" GODEBUG=cpu.avx512f=off
  ;;
all)
  build native twin agree nativemem
  # GODEBUG's personality leaves the native engine's memory as it is (its
  # assembly allocates nothing), so nativemem runs under OpenBLAS's alone.
  for e in "" OPENBLAS_CORETYPE=Haswell OPENBLAS_CORETYPE=SkylakeX OPENBLAS_CORETYPE=Prescott GODEBUG=cpu.avx512f=off; do
    run native "$native_run" $e
    run twin "$twin_run" $e
    case $e in
    "") run nativemem "$nativemem_run" ;;
    OPENBLAS_CORETYPE=*) run nativemem "$nativemem_blas" $e ;;
    esac
  done
  for e in "" ONEDNN_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX512_CORE ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16; do
    [ -n "$e" ] && run twin "$twin_run" $e
    run agree "$agree_run" $e
    if [ "$e" = ONEDNN_MAX_CPU_ISA=AVX2 ]; then
      run torchmem "$torchmem_avx2" $e
    else
      run torchmem "$torchmem_run" $e
    fi
  done
  ;;
*)
  echo "usage: cpus.sh [all|fast]" >&2
  exit 2
  ;;
esac

if ((${#failed[@]})); then
  printf 'cpus: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "cpus: all passed"
