#!/bin/bash
# expected: none
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
GPT_MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 11008
    --num-attention-heads 32
    --group-query-attention --num-query-groups 8
    --seq-length 4096 --max-position-embeddings 4096
    --swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights
    --disable-bias-linear
)
TRAINING_ARGS=(--micro-batch-size 1 --global-batch-size 1024 --train-samples 100000000 --bf16 --recompute-activations)
PARALLEL=(--tensor-model-parallel-size 4 --pipeline-model-parallel-size 1)
srun torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py ${GPT_MODEL_ARGS[@]} ${TRAINING_ARGS[@]} ${PARALLEL[@]} --vocab-size 32000
