#!/bin/bash
# expected: hf:gpt2, 256, 500000 steps
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
# Megatron-LM's examples/pretrain_gpt_distributed.sh: GPT-2 345M
GPUS_PER_NODE=8
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes 1 --node_rank 0 --master_addr localhost --master_port 6000"
GPT_ARGS="
    --num-layers 24 \
    --hidden-size 1024 \
    --num-attention-heads 16 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --micro-batch-size 8 \
    --global-batch-size 256 \
    --lr 0.00015 \
    --train-iters 500000 \
    --lr-decay-iters 320000 \
    --lr-decay-style cosine \
    --min-lr 1.0e-5 \
    --weight-decay 1e-2 \
    --lr-warmup-fraction .01 \
    --clip-grad 1.0 \
    --fp16
"
DATA_ARGS="--data-path my-gpt2_text_document --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --split 949,50,1"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py $GPT_ARGS $DATA_ARGS --save ckpt --load ckpt
