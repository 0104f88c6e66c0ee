#!/bin/bash
# The HiPower paper's ResNet-152 case: a parameter-server flow over UCP tag
# messages with ResNet-152's tensor sizes, 4 workers pushing gradients to 1
# server and pulling parameters back; flow completion time per iteration.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../../test/bench/ucp/wl-lib.sh"
S=resnet
RANKS=5

# Scaling: the whole model is 230 MiB each way per worker per iteration,
# minutes on rxe. Every 2nd tensor (not 3: it would pick only the
# convolution weights, every layer being weight, gamma, beta), tensors above
# 4 KB divided by 256 (not below 4 KB): 234 messages each way per worker,
# ~0.8 MB, ~6.5 MB per iteration in all.
stride=2 shrink=256 iters=2
[ "$BENCH_QUICK" = 1 ] && stride=4 shrink=256 iters=1

bench_metric $S fct "ResNet-152 parameter-server flow completion time per iteration (median of $iters)" ms lower "" noplot
bench_metric $S fct_max "ResNet-152 flow completion time, slowest iteration of a run" ms lower "" noplot

bench_note $S "5 processes of \`test/bench/ucp/ucp_workloads resnet\` on 5 rxe devices: rank 0 is the parameter server, ranks 1-4 the workers. The tensor list is derived from the ResNet-152 architecture (conv1 7x7x3x64, bottleneck stages of 3/8/36/3 blocks with 1x1/3x3/1x1 convolutions and projection shortcuts, BatchNorm gamma and beta per convolution, fc 2048x1000 + bias): 467 float32 tensors, 60,192,808 parameters (240.8 MB), 229 of them under 4 KB, the largest 9.4 MB."
bench_note $S ""
bench_note $S "One iteration: a barrier; every worker sends its gradient of every tensor to the server, all at once (one UCP tag message per tensor); as soon as the server holds a tensor from all 4 workers (each checked byte for byte) it writes the new parameters and sends them to every worker; each worker checks every tensor it gets back and sends an 8-byte done. **Flow completion time** = from the server's release of the barrier to the last worker's done. Each run has one untimed iteration, then $iters timed ones; a sample is the median (\`fct\`) and the maximum (\`fct_max\`) of a run's timed iterations. Busy polling, all three transports, interleaved in each repetition."
bench_note $S ""
bench_note $S "**Scaled down for the rig** (rxe moves ~2-20 MB/s here; the full model is 2 x 240.8 MB per worker per iteration): an iteration sends only every ${stride}-th tensor of the list (\`--tensor-stride $stride\`), and divides the size of every tensor above 4 KB by $shrink, not below 4 KB (\`--shrink $shrink\`), leaving the small ones exact. So the number of messages is 1/$stride of the real one and the bytes about 1/$((stride * shrink)): it keeps the many-small-tensors character of the flow, not its volume."

for rep in $(seq "$BENCH_REPS"); do
    for col in rc_verbs hipower hipower-pull; do
        bench_log "resnet rep $rep/$BENCH_REPS: $col (stride $stride, shrink $shrink)"
        wl_launch "resnet-$col-rep$rep" "$col" "$RANKS" resnet --tensor-stride "$stride" \
            --shrink "$shrink" --iters "$iters" --warmup-iters 1 --timeout 400
        wl_find pattern=resnet
        wl_record $S fct iteration "$col" "$rep" fct_ms_median
        wl_record $S fct_max iteration "$col" "$rep" fct_ms_max
    done
done
# What one iteration moved, as the program said it
moved=$(grep -h -m1 -o 'an iteration sends.*' "$BENCH_OUT"/raw/resnet-*.log 2> /dev/null | head -1)
[ -n "$moved" ] && bench_note $S "The program: \"$moved\"."
exit 0
