#!/bin/bash
# expected: hf:gpt2, 64, 100 steps
#SBATCH --gres=gpu:2
#SBATCH --time=10:00:00
# write accelerate's config (it's generated here) <<NOT
cat > acc.yaml <<'EOF'
# don't edit: it's written by the job
mixed_precision: bf16
num_processes: 2
EOF
echo It works <<< "x"
GPT_ARGS=(
    --model_name_or_path gpt2   # the model
    --per_device_train_batch_size 8
    --max_steps 100 # few
)
ACC=4
NGPU=$(nvidia-smi -L | wc -l)
EXTRA="--block_size 256 --gradient_accumulation_steps $ACC"
accelerate launch --config_file acc.yaml run_clm.py "${GPT_ARGS[@]}" $EXTRA --output_dir out
