#!/bin/bash
# expected: none
#SBATCH --gres=gpu:8
#SBATCH --time=3-00:00:00
TOTAL_UPDATES=125000
PEAK_LR=0.0005
TOKENS_PER_SAMPLE=512
MAX_SENTENCES=16
UPDATE_FREQ=16
DATA_DIR=data-bin/wikitext-103
fairseq-train --fp16 $DATA_DIR \
    --task masked_lm --criterion masked_lm \
    --arch roberta_base --sample-break-mode complete --tokens-per-sample $TOKENS_PER_SAMPLE \
    --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-6 --clip-norm 0.0 \
    --lr-scheduler polynomial_decay --lr $PEAK_LR --total-num-update $TOTAL_UPDATES \
    --batch-size $MAX_SENTENCES --update-freq $UPDATE_FREQ \
    --max-update $TOTAL_UPDATES --log-format simple --log-interval 1
