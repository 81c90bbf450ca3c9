#!/bin/sh
#PBS -l nodes=2:ppn=1
#PBS -l walltime=45:00
true
