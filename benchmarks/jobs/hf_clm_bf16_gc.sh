#!/bin/bash
# expected: hf:openai-community/gpt2-medium, 64, 5 epochs
#SBATCH --job-name=gpt2-medium-wt2
#SBATCH --gres=gpu:a100:2
#SBATCH --cpus-per-task=16
#SBATCH --time=10:00:00
module load cuda/12.1
source ~/venvs/hf/bin/activate
cd $SLURM_SUBMIT_DIR
python -m torch.distributed.run --nproc_per_node=2 run_clm.py \
  --model_name_or_path openai-community/gpt2-medium \
  --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 \
  --per_device_train_batch_size 8 --gradient_accumulation_steps 4 \
  --gradient_checkpointing --bf16 --num_train_epochs 5 --block_size 1024 \
  --do_train --output_dir $SCRATCH/gpt2-medium
