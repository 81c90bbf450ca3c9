#!/bin/bash
# expected: hf:meta-llama/Llama-3.1-8B, 16, 5000 steps
# torchtitan (TOML-config releases, v0.1/v0.2): configs/torchtitan/llama3_8b_tp2.toml has local_batch_size 4,
# tensor_parallel_degree 2, data_parallel_shard_degree -1 -> DP = 8 GPUs / TP 2 = 4; global_batch_size unset (-1)
# -> global = local_batch_size x DP = 4 x 4 = 16 sequences of 8192 tokens.
# training.steps is 1000 in the TOML but overridden on the command line to 5000.
#SBATCH --job-name=titan-llama3-8b
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=96
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH --time=12:00:00
#SBATCH --output=logs/titan-%j.out

source /opt/conda/etc/profile.d/conda.sh
conda activate titan

export HF_TOKEN=$(cat ~/.cache/huggingface/token)
CFG=$SLURM_SUBMIT_DIR/configs/torchtitan/llama3_8b_tp2.toml

cd $HOME/src/torchtitan    # checked out at v0.2.2

# tokenizer only; the model is trained from scratch
if [ ! -d assets/hf/Llama-3.1-8B ]; then
    python scripts/download_hf_assets.py --repo_id meta-llama/Llama-3.1-8B --assets tokenizer
fi

NGPU=8 LOG_RANK=0 CONFIG_FILE=$CFG ./run_train.sh \
    --training.steps 5000 \
    --job.dump_folder /scratch/$USER/titan/llama3_8b_tp2
