#!/bin/bash
# expected: hf:meta-llama/Llama-2-7b-hf, 256, 50000 steps
# Megatron-LM --global-batch-size is already global (256 sequences of 4096 tokens); 32 GPUs / (TP 2 x PP 2) = DP 8,
# micro-batch 1 -> 32 micro-batches per DP rank per step. Bounded by --train-iters 50000.
# Architecture flags = Llama-2-7B (32 layers, hidden 4096, FFN 11008, 32 heads, RMSNorm, SwiGLU, RoPE, untied), trained from
# scratch with the meta-llama/Llama-2-7b-hf tokenizer.
#SBATCH --job-name=mlm-llama2-7b
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=96
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=2-00:00:00
#SBATCH --output=logs/%x-%j.out

set -euo pipefail

# container-free install; TransformerEngine + apex built in this env
module load cuda/12.4 cudnn/9.1 nccl/2.21
source /shared/envs/megatron-core/bin/activate

export CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_IB_QPS_PER_CONNECTION=4
export NCCL_NVLS_ENABLE=0
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
export HF_HOME=/shared/hf

MEGATRON=/shared/src/Megatron-LM
CKPT_DIR=/checkpoints/$USER/llama2-7b-fineweb
TB_DIR=$CKPT_DIR/tensorboard
DATA_PREFIX=/data/megatron/fineweb_edu_llama2_text_document

MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MASTER_PORT=6000
GPUS_PER_NODE=8

TP=2
PP=2

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $SLURM_NNODES
    --rdzv_id $SLURM_JOB_ID
    --rdzv_backend c10d
    --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT
)

MODEL_ARGS=(
    --use-mcore-models
    --transformer-impl transformer_engine
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 11008
    --num-attention-heads 32
    --seq-length 4096
    --max-position-embeddings 4096
    --position-embedding-type rope
    --normalization RMSNorm
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 256
    --train-iters 50000
    --lr 3e-4
    --min-lr 3e-5
    --lr-decay-style cosine
    --lr-warmup-iters 2000
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --init-method-std 0.02
    --clip-grad 1.0
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --sequence-parallel
)

DATA_ARGS=(
    --data-path $DATA_PREFIX
    --split 990,8,2
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model meta-llama/Llama-2-7b-hf
)

LOGGING_ARGS=(
    --log-interval 10
    --save-interval 2000
    --eval-interval 1000
    --eval-iters 10
    --save $CKPT_DIR
    --load $CKPT_DIR
    --tensorboard-dir $TB_DIR
    --log-throughput
)

cd $MEGATRON

srun --kill-on-bad-exit=1 torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${TRAINING_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${DATA_ARGS[@]} \
    ${LOGGING_ARGS[@]}
