#!/bin/sh
#PBS -q v100
#PBS -l walltime=01:30:00
#PBS -N pbsname
true
