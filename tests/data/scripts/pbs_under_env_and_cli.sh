#!/bin/sh
#PBS -q v100
#PBS -l walltime=02:00:00
true
