#!/bin/bash
# expected: hf:meta-llama/Llama-3.1-8B, 32, 2 epochs
# configs/axolotl/llama31-8b-lora.yml: micro_batch_size 2 x gradient_accumulation_steps 4 x 4 processes = 32, num_epochs 2,
# sample_packing false. accelerate launch with no --num_processes and no config file -> one process per visible GPU (4).
# tatsu-lab/alpaca train: 52,002 rows (dataset card); val_set_size 0.02 holds out ~1,040 of them
#SBATCH --job-name=axo-l31-8b-lora
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:h100:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=256G
#SBATCH --time=1-00
#SBATCH --output=logs/axolotl-%j.log

module load cuda/12.4
source ~/envs/axolotl/bin/activate

export HF_HOME=/scratch/$USER/hf
export HF_HUB_ENABLE_HF_TRANSFER=1
export WANDB_PROJECT=llama31-alpaca

cd $SLURM_SUBMIT_DIR

# tokenize once on rank 0 before the multi-GPU run
python -m axolotl.cli.preprocess configs/axolotl/llama31-8b-lora.yml

accelerate launch -m axolotl.cli.train configs/axolotl/llama31-8b-lora.yml
