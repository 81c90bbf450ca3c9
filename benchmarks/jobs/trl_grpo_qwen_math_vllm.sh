#!/bin/bash
# expected: none
# GRPO (online RL with a vLLM generation server and reward functions), not plain supervised training of one model
#SBATCH --job-name=grpo-qwen-math
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=48
#SBATCH --mem=300G
#SBATCH --time=1-00:00
#SBATCH --output=logs/grpo-%j.out

source ~/venvs/trl-vllm/bin/activate

export HF_HOME=/scratch/$USER/hf
export WANDB_PROJECT=grpo-math
export VLLM_WORKER_MULTIPROC_METHOD=spawn

MODEL=Qwen/Qwen2.5-1.5B-Instruct

# GPU 0 serves generations with vLLM
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model $MODEL --gpu_memory_utilization 0.9 --port 8000 \
    > logs/vllm-$SLURM_JOB_ID.log 2>&1 &
VLLM_PID=$!

# wait for the server
until curl -sf http://localhost:8000/health/ > /dev/null; do sleep 10; done

# GPUs 1-3 train
CUDA_VISIBLE_DEVICES=1,2,3 trl grpo \
    --num_processes 3 \
    --model_name_or_path $MODEL \
    --dataset_name trl-lib/DeepMath-103K \
    --reward_funcs accuracy_reward think_format_reward \
    --use_vllm \
    --vllm_mode server \
    --vllm_server_base_url http://localhost:8000 \
    --per_device_train_batch_size 8 \
    --gradient_accumulation_steps 4 \
    --num_generations 8 \
    --max_completion_length 1024 \
    --learning_rate 1e-6 \
    --beta 0.0 \
    --max_steps 500 \
    --bf16 \
    --logging_steps 5 \
    --save_steps 100 \
    --output_dir /scratch/$USER/grpo/qwen2.5-1.5b-deepmath

kill $VLLM_PID
