#!/bin/bash
# expected: hf:EleutherAI/pythia-410m, 64, 3 epochs
# all arguments come from configs/clm_pythia410m_wt103.json (HfArgumentParser.parse_json_file when the only argv is a .json)
# 16 per device x grad_accum 2 x 2 GPUs = 64; num_train_epochs not in the JSON -> TrainingArguments default 3.0
# wikitext-103-raw-v1 train: 1,801,350 rows (HF dataset card Salesforce/wikitext), grouped into 2048-token blocks by run_clm
#SBATCH -J pythia410m-wt103
#SBATCH -p gpu
#SBATCH -N 1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=2
#SBATCH -c 16
#SBATCH --mem=96G
#SBATCH --time=2-00
#SBATCH -o logs/%x_%j.log

source ~/miniforge3/etc/profile.d/conda.sh
conda activate hf-train

export HF_HOME=$SCRATCH/.cache/huggingface
export NCCL_DEBUG=WARN

RUN_CLM=$HOME/code/transformers/examples/pytorch/language-modeling/run_clm.py

echo "Job $SLURM_JOB_ID on $(hostname), GPUs: $CUDA_VISIBLE_DEVICES"
cat configs/clm_pythia410m_wt103.json

torchrun --nnodes=1 --nproc_per_node=2 --master_port=29533 \
    $RUN_CLM configs/clm_pythia410m_wt103.json
