#!/bin/bash
# expected: none
# data preprocessing only (tokenize JSONL into Megatron .bin/.idx), CPU job, no training
#SBATCH --job-name=prep-fineweb
#SBATCH --partition=cpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=64
#SBATCH --mem=256G
#SBATCH --time=360
#SBATCH --output=logs/prep-%j.out

set -euo pipefail

source /shared/envs/megatron-core/bin/activate
export HF_HOME=/shared/hf

RAW=/data/raw/fineweb-edu/sample-10BT
OUT=/data/megatron
mkdir -p $OUT

# merge the parquet->jsonl shards first
cat $RAW/*.jsonl > $TMPDIR/fineweb_edu_10BT.jsonl

cd /shared/src/Megatron-LM
python tools/preprocess_data.py \
    --input $TMPDIR/fineweb_edu_10BT.jsonl \
    --output-prefix $OUT/fineweb_edu_llama2 \
    --tokenizer-type HuggingFaceTokenizer \
    --tokenizer-model meta-llama/Llama-2-7b-hf \
    --json-keys text \
    --append-eod \
    --workers 60

ls -lh $OUT/fineweb_edu_llama2_text_document.*
