#!/bin/bash
# expected: hf:meta-llama/Meta-Llama-3-8B-Instruct, 64, 3 epochs
# YAML written by the heredoc below: per_device_train_batch_size 2 x gradient_accumulation_steps 8 x 4 GPUs = 64;
# llamafactory-cli train re-launches itself under torchrun with NPROC_PER_NODE = visible GPU count (4) when FORCE_TORCHRUN=1
# or more than one GPU is visible. num_train_epochs 3.0.
# dataset alpaca_en -> llamafactory/alpaca_en on the Hub (data/dataset_info.json), the Stanford Alpaca set: 52,002 rows
#SBATCH --job-name=lf-llama3-sft
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=32
#SBATCH --mem=200G
#SBATCH --time=16:00:00
#SBATCH --output=logs/lf-%j.out

source ~/miniconda3/bin/activate llamafactory

export HF_HOME=/scratch/$USER/hf
export FORCE_TORCHRUN=1
export WANDB_DISABLED=true

RUN_NAME=llama3-8b-it-alpaca-lora-r16
WORKDIR=/scratch/$USER/llamafactory/$RUN_NAME
mkdir -p $WORKDIR
CFG=$WORKDIR/train.yaml

cat > $CFG <<EOF
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 16
lora_alpha: 32
lora_target: all

### dataset
dataset: alpaca_en
dataset_dir: $HOME/src/LLaMA-Factory/data
template: llama3
cutoff_len: 1024
overwrite_cache: true
preprocessing_num_workers: 16
dataloader_num_workers: 4

### output
output_dir: $WORKDIR/saves
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
report_to: none

### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000

### eval
val_size: 0.01
per_device_eval_batch_size: 4
eval_strategy: steps
eval_steps: 500
EOF

cd $HOME/src/LLaMA-Factory
llamafactory-cli train $CFG
